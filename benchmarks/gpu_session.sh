#!/bin/bash
# One lent-GPU session's checks, in one call: the GPU-marked tests, then the GPU benchmarks
# ($BENCHMARKS, default all three), then with $DEMO_SECONDS set `sched demo --tune 16` on
# CUDA; logs and result JSON go to $OUT (or ./gpu_out). Used by stop 21 on an H200:
#   TEST_SECONDS=170 BENCH_SECONDS=150 bash benchmarks/gpu_session.sh
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
  -p no:cacheprovider --continue-on-collection-errors --junitxml="$OUT/gpu_tests.xml" \
  > "$OUT/gpu_tests.log" 2>&1
echo "pytest exit $?"; grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -3
for bench in ${BENCHMARKS:-gpu_tensor_core gpu_rows gpu_matmul}; do
  timeout "${BENCH_SECONDS:-150}" python3 "benchmarks/$bench.py" >> "$OUT/bench.log" 2>&1
  echo "$bench exit $?"
done
if [ -n "${DEMO_SECONDS:-}" ]; then          # the demo on CUDA, with a short tuning run
  timeout "$DEMO_SECONDS" python3 -m sched demo --tune 16 > "$OUT/demo.log" 2>&1
  echo "demo exit $?"; tail -5 "$OUT/demo.log"
fi
cp benchmarks/results/*/gpu_*.json "$OUT/" 2>/dev/null
tail -40 "$OUT/bench.log"
