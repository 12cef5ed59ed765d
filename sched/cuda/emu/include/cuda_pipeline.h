// sched cuda-emu: asynchronous copies with their reference semantics (emu_pipeline.h)
#include "cuda_emu.h"
