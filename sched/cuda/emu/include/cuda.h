// sched cuda-emu: everything CUDA C needs is in cuda_emu.h
#include "cuda_emu.h"
