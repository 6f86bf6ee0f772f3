// dev/cuda/emu/cuda_fp16.h: the fp16 type, declared only: the fp16 build is not emulated, so a
// kernel that converts __half fails to link (dev/cuda/emu/cuda_runtime.h says what is emulated)
#pragma once
#include "dev/cuda/emu/cuda_runtime.h"
struct __half { uint16_t bits; };
float __half2float(__half h);
__half __float2half_rn(float f);
