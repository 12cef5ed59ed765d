// sched cuda-emu: nvcuda::wmma with its reference semantics (emu_wmma.h)
#include "emu_wmma.h"
