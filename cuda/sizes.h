// cuda/sizes.h: the sizes of the kernels' buffers and scratch, as plain
// arithmetic (no CUDA), so that the memory estimator of a CPU-only build can
// count the GPU trainer's memory too (train/activations.h).
#pragma once
#include <stddef.h>

// blocks of the norm backward kernel at most; its scratch holds this many partial rows (layernorm.cuh)
#define NORM_BWD_MAX_BLOCKS 1024
// splits of the rows in the bias-gradient reduction at most (matmul.cuh)
#define MATMUL_DBIAS_MAX_SPLITS 64
// the cuBLASLt workspace matmul_setup allocates (matmul.cuh)
#define CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

// attention scratch sizes in elements (attention.cuh)
static size_t attention_att_elems(int B, int T, int H) { return (size_t)B * H * T * T; }         // att, scratch_f32, scratch_bf16
static size_t attention_qkv_elems(int B, int T, int H, int KV, int hd) { return (size_t)B * T * (H + 2 * KV) * hd; }  // qkvr, dqkvr
static size_t attention_y_elems(int B, int T, int H, int hd) { return (size_t)B * H * T * hd; }  // scratch_y
// the fused attention's saved log-sum-exp and its backward's D, fp32 elements (flash_attention.cuh)
static size_t flash_lse_elems(int B, int T, int H) { return (size_t)B * H * T; }
// the longest sequence it takes: ceil(T / 64) query tiles on the grid's y dimension (at most 65535)
#define FLASH_MAX_T (65535 * 64)
// floats of `scratch` the norm backward functions need for width C (layernorm.cuh)
static size_t norm_backward_scratch_floats(int C) { return (size_t)NORM_BWD_MAX_BLOCKS * 2 * C; }
// floats of scratch matmul_backward needs for the bias gradient of width OC (matmul.cuh)
static size_t matmul_dbias_scratch_floats(int OC) { return (size_t)MATMUL_DBIAS_MAX_SPLITS * OC; }
