// nvcuda::wmma (mma.h): warp-wide matrix fragments with the reference semantics of the tensor
// core operations: D = A * B + C over M x N x K tiles (m16n16k16, m32n8k16, m8n32k16), half or
// bfloat16 in, float (or half) accumulators, products summed in float in k order; signed char
// in, int accumulators, summed exactly in integers.
//
// A fragment's elements are spread over the 32 lanes of the warp: lane l holds elements
// l * num_elements ... of the row-major tile (CUDA leaves the mapping unspecified, so code
// that is right on the GPU does not depend on it: elementwise loops over `x` stay right).
// Every operation is a warp collective (all 32 lanes take part, as CUDA requires: a lane
// missing is reported like a barrier not every thread reaches); mma_sync reads the other
// lanes' fragments through it.
// Part of sched's CUDA emulation header: included by mma.h.
#ifndef SCHED_EMU_WMMA_H
#define SCHED_EMU_WMMA_H

#include <type_traits>

#include "cuda_emu.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K> struct tile_shape;
template <int M, int N, int K> struct tile_shape<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K> struct tile_shape<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K> struct tile_shape<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
                  (M == 8 && N == 32 && K == 16), "wmma shapes: m16n16k16, m32n8k16, m8n32k16");
    static constexpr int rows = tile_shape<Use, M, N, K>::rows;
    static constexpr int cols = tile_shape<Use, M, N, K>::cols;
    static constexpr int num_elements = rows * cols / 32;
    typedef T element_type;
    T x[num_elements];

    // (row, column) of this lane's element k in the tile
    static int row_of(int k) { return ((int)::sched_emu::lane_id() * num_elements + k) / cols; }
    static int col_of(int k) { return ((int)::sched_emu::lane_id() * num_elements + k) % cols; }
};
}  // namespace wmma
}  // namespace nvcuda

namespace sched_emu {
inline void wmma_collective(int line, const char* what) {
    unsigned group;
    warp_collective(0xffffffffu, 0, line, what, &group);
}

template <typename Layout> inline bool is_column_major();
template <> inline bool is_column_major<nvcuda::wmma::row_major>() { return false; }
template <> inline bool is_column_major<nvcuda::wmma::col_major>() { return true; }

template <typename F, typename T>
void wmma_fill(int line, F& f, const T& value) {
    wmma_collective(line, "wmma::fill_fragment");
    for (int k = 0; k < F::num_elements; ++k) f.x[k] = value;
}

template <typename F, typename T>
void wmma_load(int line, F& f, const T* p, unsigned ldm, bool column_major) {
    wmma_collective(line, "wmma::load_matrix_sync");
    for (int k = 0; k < F::num_elements; ++k) {
        int r = F::row_of(k), c = F::col_of(k);
        f.x[k] = p[column_major ? r + (size_t)c * ldm : (size_t)r * ldm + c];
    }
}

template <typename F, typename T>
void wmma_store(int line, T* p, const F& f, unsigned ldm, bool column_major) {
    wmma_collective(line, "wmma::store_matrix_sync");
    for (int k = 0; k < F::num_elements; ++k) {
        int r = F::row_of(k), c = F::col_of(k);
        p[column_major ? r + (size_t)c * ldm : (size_t)r * ldm + c] = f.x[k];
    }
}

// element (row, col) of the tile whose lanes' fragments are `lanes`, as an S
template <typename S, typename F>
S tile_element(const F* const* lanes, int row, int col) {
    int e = row * F::cols + col;
    return (S)lanes[e / F::num_elements]->x[e % F::num_elements];
}

// products and sums of an mma in float (fused multiply-adds), or exactly in integers
inline float multiply_add(float a, float b, float c) { return fmaf(a, b, c); }
inline long long multiply_add(long long a, long long b, long long c) { return a * b + c; }

// D = A * B + C: each lane computes its own elements of D from every lane's A, B and C,
// whose addresses the lanes exchange; a second collective keeps D (which may be C) unwritten
// until every lane has read what it needs
template <typename D, typename A, typename B, typename C>
void wmma_mma(int line, D& d, const A& a, const B& b, const C& c) {
    struct Operands { const A* a; const B* b; const C* c; } mine{&a, &b, &c};
    unsigned group;
    const uint64_t* addresses = warp_collective(
        0xffffffffu, (uint64_t)(uintptr_t)&mine, line, "wmma::mma_sync", &group);
    const A* as[32];
    const B* bs[32];
    const C* cs[32];
    for (int l = 0; l < 32; ++l) {
        const Operands* lane = (const Operands*)(uintptr_t)addresses[l];
        as[l] = lane->a;
        bs[l] = lane->b;
        cs[l] = lane->c;
    }
    typedef typename std::conditional<std::is_integral<typename D::element_type>::value,
                                      long long, float>::type S;
    S result[D::num_elements];
    for (int k = 0; k < D::num_elements; ++k) {
        int row = D::row_of(k), col = D::col_of(k);
        S sum = tile_element<S>(cs, row, col);
        for (int i = 0; i < A::cols; ++i)
            sum = multiply_add(tile_element<S>(as, row, i), tile_element<S>(bs, i, col), sum);
        result[k] = sum;
    }
    wmma_collective(line, "wmma::mma_sync");
    for (int k = 0; k < D::num_elements; ++k) d.x[k] = result[k];
}
}  // namespace sched_emu

namespace nvcuda {
namespace wmma {
// each call is a macro that adds its line (for the emulator's reports) and calls <name>_at
template <typename F, typename T>
void fill_fragment_at(int line, F& f, const T& value) { ::sched_emu::wmma_fill(line, f, value); }
template <typename D, typename A, typename B, typename C>
void mma_sync_at(int line, D& d, const A& a, const B& b, const C& c) {
    ::sched_emu::wmma_mma(line, d, a, b, c);
}
// load_matrix_sync(f, p, ldm) for matrix_a/b (layout from the fragment's type), or
// load_matrix_sync(f, p, ldm, layout) for an accumulator
template <typename Use, int M, int N, int K, typename T, typename Layout, typename U>
void load_matrix_sync_at(int line, fragment<Use, M, N, K, T, Layout>& f, const U* p,
                         unsigned ldm) {
    ::sched_emu::wmma_load(line, f, p, ldm, ::sched_emu::is_column_major<Layout>());
}
template <int M, int N, int K, typename T, typename U>
void load_matrix_sync_at(int line, fragment<accumulator, M, N, K, T>& f, const U* p,
                         unsigned ldm, layout_t layout) {
    ::sched_emu::wmma_load(line, f, p, ldm, layout == mem_col_major);
}
template <int M, int N, int K, typename T, typename U>
void store_matrix_sync_at(int line, U* p, const fragment<accumulator, M, N, K, T>& f,
                          unsigned ldm, layout_t layout) {
    ::sched_emu::wmma_store(line, p, f, ldm, layout == mem_col_major);
}
#define fill_fragment(...) fill_fragment_at(__LINE__, __VA_ARGS__)
#define mma_sync(...) mma_sync_at(__LINE__, __VA_ARGS__)
#define load_matrix_sync(...) load_matrix_sync_at(__LINE__, __VA_ARGS__)
#define store_matrix_sync(...) store_matrix_sync_at(__LINE__, __VA_ARGS__)
}  // namespace wmma
}  // namespace nvcuda

#endif  // SCHED_EMU_WMMA_H
