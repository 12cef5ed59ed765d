"""C and CUDA identifiers for IR names: one naming layer for both outputs.

IR names are free text (`exp`, `C.1`, `int32_t`, `NAN`, `é`); the generated code needs C
identifiers that are valid, unique and clash with nothing the code uses. `CNames(func)` maps
every name of a lowered function (its own, its buffers and storages, its variables) to one:

- characters outside `[A-Za-z0-9_]` become `_`; a leading digit or underscore gets a `v`
  in front (names starting with `_` are reserved to the implementation in C and CUDA);
- a name that is a C or C++ keyword, a type or macro of the headers the code includes
  (`int32_t`, `NAN`, `INFINITY`, `INT64_C`), a libm or libc function (`exp`, `fmaxf`, `free`),
  a CUDA builtin (`threadIdx`, `min`, `float4`), or starts with `sched_` (the helpers' prefix)
  gets a `_` appended;
- names that are still equal after that (`exp` -> `exp_` and a buffer `exp_`; `C.1` and `C-1`)
  get `_1`, `_2`, ... in a fixed order: names that are already good identifiers keep them.

The function's own name is mapped first and by itself (`function_identifier`), so that the
exported symbol is known without the body; it is never a libc or libm symbol.
"""

from __future__ import annotations

import re

from sched.ir.functor import collect, free_vars
from sched.ir.nodes import Allocate, BufferLoad, BufferStore, For, LetStmt, PrimFunc, Var

_C_KEYWORDS = """auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
_Imaginary _Noreturn _Static_assert _Thread_local _Float16 bool true false main"""

_CXX_KEYWORDS = """alignas alignof and and_eq asm bitand bitor catch char8_t char16_t char32_t
class compl concept const_cast consteval constexpr constinit co_await co_return co_yield
decltype delete dynamic_cast explicit export friend mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public reinterpret_cast requires static_assert
static_cast template this thread_local throw try typeid typename using virtual wchar_t xor
xor_eq final override"""

_HEADER_NAMES = """int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t
uintptr_t size_t ptrdiff_t NULL INT8_MIN INT16_MIN INT32_MIN INT64_MIN INT8_MAX INT16_MAX
INT32_MAX INT64_MAX UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX INT64_C UINT64_C INT32_C
UINT32_C NAN INFINITY HUGE_VAL HUGE_VALF HUGE_VALL FP_NAN FP_INFINITE FP_ZERO FP_NORMAL
FP_SUBNORMAL FP_FAST_FMA FP_FAST_FMAF FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO MATH_ERREXCEPT
math_errhandling M_PI M_E EOF errno assert offsetof float_t double_t isnan isinf isfinite
isnormal signbit fpclassify isgreater isgreaterequal isless islessequal islessgreater
isunordered malloc calloc realloc free aligned_alloc abort exit atexit getenv system qsort
bsearch abs labs llabs div ldiv lldiv rand srand atoi atol atof strtol strtod memcpy memmove
memset memcmp strlen strcmp printf fprintf sprintf puts stdin stdout stderr
omp_get_thread_num omp_get_num_threads FILE fopen fclose fread fwrite fflush fputs fgets fputc
fgetc putchar getchar fseek ftell snprintf vsnprintf vsprintf vfprintf vprintf sscanf scanf
fscanf va_list va_start va_end va_arg va_copy strcpy strncpy strcat strncat strchr strrchr
strstr strncmp strspn strcspn strpbrk memchr uintmax_t intmax_t bool true false"""

# libm: each also with the f and l suffixes
_MATH_FUNCTIONS = """acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2
expm1 frexp ldexp log log10 log1p log2 logb ilogb modf scalbn scalbln cbrt fabs hypot pow sqrt
erf erfc lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod
remainder remquo copysign nan nextafter nexttoward fdim fmax fmin fma rsqrt exp10 sincos"""

# POSIX and GNU functions the C library headers declare (a kernel named `time` or `y0`
# conflicted with them in an exported program, in cuda-emu's C++ and under NVRTC, and an
# exported `time.h` shadowed the system header: audit helper-78), and C23's narrowing
# arithmetic (fadd, fdiv...: libm has them)
_POSIX_NAMES = """time clock_gettime signal raise kill alarm pause sleep usleep nanosleep
select poll pipe fork wait waitpid read write open close creat lseek dup dup2 unlink link
remove rename stat fstat lstat sync fsync index rindex bcopy bzero bcmp ffs random srandom
drand48 erand48 lrand48 mrand48 srand48 y0 y1 yn j0 j1 jn gamma drem finite significand
scalb fadd fsub fmul fdiv fsqrt ffma dadd dsub dmul ddiv dsqrt dfma socket connect listen
accept send recv shutdown getpid getppid sysconf strdup strndup strtok strerror perror
popen pclose sigaction setjmp longjmp"""

_CUDA_NAMES = """threadIdx blockIdx blockDim gridDim warpSize dim3 min max umin umax llmin llmax
float2 float3 float4 int2 int3 int4 uint2 uint4 double2 char4 uchar4 half half2 __half
__nv_bfloat16 atomicAdd atomicMax atomicMin atomicExch atomicCAS clock clock64 printf
make_float4 make_float2 make_int4 rsqrtf saturate extern_shared"""


def _reserved() -> frozenset[str]:
    names = set(" ".join((_C_KEYWORDS, _CXX_KEYWORDS, _HEADER_NAMES, _POSIX_NAMES,
                          _CUDA_NAMES)).split())
    for function in _MATH_FUNCTIONS.split():
        names |= {function, function + "f", function + "l"}
    return frozenset(names)


RESERVED = _reserved()
HELPER_PREFIX = "sched_"


def sanitize(name: str) -> str:
    """`name` as a valid C identifier that clashes with nothing reserved (module docstring);
    not yet unique."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if text[0].isdigit() or text[0] == "_":
        text = "v" + text
    if text in RESERVED or text.lower().startswith(HELPER_PREFIX):     # SCHED_OK too
        text += "_"
    return text


def function_identifier(name: str) -> str:
    """The C name of a kernel function called `name` (the symbol the library exports)."""
    return sanitize(name)


def _ir_names(func: PrimFunc) -> list[tuple[str, str]]:
    """Every name the generated code of `func` may print, as (kind, name), kind "buffer" (a
    buffer or storage) or "var" (a variable): a buffer and a variable may share a name in the
    IR (a dim `A` of a buffer `A`) and need two identifiers. In a fixed order."""
    names: dict[tuple[str, str], None] = {}
    for param in func.params:
        names[("var" if isinstance(param, Var) else "buffer", param.name)] = None
    for var in func.symbolic_vars:
        names[("var", var.name)] = None
    for node in collect(func.body, (Allocate, For, LetStmt, BufferLoad, BufferStore)):
        if isinstance(node, Allocate):
            names[("buffer", node.buffer.name)] = None
        elif isinstance(node, For):
            names[("var", node.loop_var.name)] = None
        elif isinstance(node, LetStmt):
            names[("var", node.var.name)] = None
        else:
            names[("buffer", node.buffer.storage_name)] = None
    for var in free_vars(func.body):
        if isinstance(var, Var):
            names[("var", var.name)] = None
    return list(names)


class CNames:
    """The C identifier of every IR name of a lowered function: `names[buffer_name]` for a
    buffer or storage, `names.var(var_name)` for a variable."""

    def __init__(self, func: PrimFunc, taken: tuple[str, ...] = ()) -> None:
        self.function = function_identifier(func.name)
        self.taken: set[str] = {self.function, *taken}
        self.table: dict[tuple[str, str], str] = {}
        everything = _ir_names(func)
        names = [key for key in everything if key[1] != func.name]
        # names that are good identifiers already keep them (a buffer's first); the others
        # come after
        for key in names:
            if sanitize(key[1]) == key[1] and key[1] not in self.taken:
                self._assign(key, key[1])
        for key in names:
            if key not in self.table:
                self._assign(key, self._unique(sanitize(key[1])))
        for key in everything:      # a parameter or loop named like the function
            if key[1] == func.name:
                self._assign(key, self._unique(sanitize(func.name)))

    def _assign(self, key: tuple[str, str], identifier: str) -> None:
        self.table[key] = identifier
        self.taken.add(identifier)

    def _unique(self, base: str) -> str:
        if base not in self.taken:
            return base
        k = 1           # (`base` is sanitized: base_k is an identifier; a reserved one never)
        while f"{base}_{k}" in self.taken or f"{base}_{k}" in RESERVED:
            k += 1
        return f"{base}_{k}"

    def __getitem__(self, name: str) -> str:
        return self._identifier(("buffer", name))

    def var(self, name: str) -> str:
        return self._identifier(("var", name))

    def _identifier(self, key: tuple[str, str]) -> str:
        identifier = self.table.get(key)
        if identifier is None:      # a name made while emitting (none today): still unique
            identifier = self._unique(sanitize(key[1]))
            self._assign(key, identifier)
        return identifier
