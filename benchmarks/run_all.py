"""Runs every benchmark this machine can run: the CPU ones always, the GPU ones with a GPU."""

from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
CPU = ["legality.py", "schedule_speed.py", "call_overhead.py", "cpu_matmul.py",
       "cpu_conv2d.py", "cpu_softmax.py", "cpu_layer_norm.py", "cpu_vector_math.py",
       "cpu_threads.py", "cuda_compile.py", "tvm_side_by_side.py"]
GPU = ["gpu_matmul.py", "gpu_rows.py"]


def main() -> int:
    sys.path.insert(0, str(HERE.parent))
    from sched.cuda.device import gpu_available

    names = CPU + (GPU if gpu_available() else [])
    failed = [name for name in names
              if subprocess.run([sys.executable, str(HERE / name)]).returncode != 0]
    if not gpu_available():
        print("no GPU: skipped " + ", ".join(GPU))
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
