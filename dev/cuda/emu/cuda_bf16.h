// dev/cuda/emu/cuda_bf16.h: bf16 is dev/cuda/emulate.h's (dev/cuda/emu/cuda_runtime.h says why)
#pragma once
#include "dev/cuda/emu/cuda_runtime.h"
