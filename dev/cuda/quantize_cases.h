// dev/cuda/quantize_cases.h: the messages dev/cuda/quantize.cu checks on the GPU and
// dev/cuda/kernels_emulate.cpp on the CPU (under UBSan's alignment check). Their lengths are
// ones the trainer can produce, a unit's shard: a multiple of ZERO_ALIGN (16) values
// (zero/plan.h), so that the scales after the codes start on a float boundary
// (cuda/quantize.cuh refuses anything else).
#pragma once
#include <vector>
#include "util/common.h"
#include "util/quantize.h"
#include "dev/cuda/host_check.h"

// a short last block of 144 values; a message shorter than one block
static const size_t ZQ_CASES[] = {37 * ZQ_BLOCK + 144, 48};
#define ZQ_N_CASES (sizeof(ZQ_CASES) / sizeof(ZQ_CASES[0]))

// values with a spread of block magnitudes, an outlier per 1000, one all-zero block; bf16: rounded
// to bf16 (what a bf16 input holds)
static std::vector<float> zq_test_values(size_t n, int bf16) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) {
        float v = dev_rand_normal() * (1.0f + (float)((i / ZQ_BLOCK) % 7));
        if (dev_rand_int(1000) == 0) v *= 50.0f;
        x[i] = bf16 ? bf16_to_float(float_to_bf16_rne(v)) : v;
    }
    for (size_t i = ZQ_BLOCK; i < 2 * ZQ_BLOCK && i < n; i++) x[i] = 0.0f;
    return x;
}
