#!/bin/bash
# One lent-GPU session's checks, in one call: the GPU-marked tests, then the GPU benchmarks
# ($BENCHMARKS, default all below; gpu_rows also at 4096^2, the size), then with
# $TUNE_SECONDS set benchmarks/tune_gpu.py (that many seconds per workload), then with
# $DEMO_SECONDS set `sched demo --tune 16` on CUDA; logs go to $OUT (or ./gpu_out) and the
# result JSONs to $OUT/gpu_results.tgz (a lease returns 8 files at most). Stop 28 on an H200:
#   TEST_SECONDS=120 BENCH_SECONDS=120 TUNE_SECONDS=60 bash benchmarks/gpu_session.sh
# Needs islpy on the device: wheels in .whl/ (python 3.12), installed into /tmp/site; the
# demo's tuning also needs xgboost (the 6 MB wheel xgboost-cpu does: pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl ...).
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv \
  | tee "$OUT/smi.txt"
python3 -c "import sched, torch; from sched.cuda.device import gpu_available; \
print('gpu_available', gpu_available(), torch.__version__, torch.cuda.get_device_name())" \
  2>&1 | tee -a "$OUT/smi.txt"
timeout "${TEST_SECONDS:-240}" python3 -m pytest -m gpu -q -n 8 --timeout 120 -rfE --tb=short \
  -p no:cacheprovider --continue-on-collection-errors > "$OUT/gpu_tests.log" 2>&1
echo "pytest exit $?"; grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -3
for bench in ${BENCHMARKS:-gpu_call_overhead gpu_tensor_core gpu_rows gpu_matmul}; do
  timeout "${BENCH_SECONDS:-150}" python3 "benchmarks/$bench.py" >> "$OUT/bench.log" 2>&1
  echo "$bench exit $?"
  if [ "$bench" = gpu_rows ]; then
    timeout "${BENCH_SECONDS:-150}" python3 benchmarks/gpu_rows.py --size 4096 \
      >> "$OUT/bench.log" 2>&1
    echo "gpu_rows --size 4096 exit $?"
  fi
done
if [ -n "${TUNE_SECONDS:-}" ]; then          # 3 workloads, their CPU references included
  timeout $((TUNE_SECONDS * 3 + 90)) python3 benchmarks/tune_gpu.py \
    --time-budget "$TUNE_SECONDS" --db /tmp/tune_gpu.db > "$OUT/tune.log" 2>&1
  echo "tune_gpu exit $?"
fi
if [ -n "${DEMO_SECONDS:-}" ]; then          # the demo on CUDA, with a short tuning run
  timeout "$DEMO_SECONDS" python3 -m sched demo --tune 16 > "$OUT/demo.log" 2>&1
  echo "demo exit $?"; tail -5 "$OUT/demo.log"
fi
tar czf "$OUT/gpu_results.tgz" benchmarks/results/nvidia-*/ 2>/dev/null
tail -40 "$OUT/bench.log"
