// sched cuda-emu: asynchronous copies with their reference semantics (emu_pipeline.h)
#include "emu_pipeline.h"
