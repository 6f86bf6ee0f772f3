// util/quantize.h: ZeRO++'s block-based symmetric quantization (Wang et al., 2023,
// "ZeRO++", section 4.1), the CPU reference. zero/host.h quantizes with it, and the GPU
// kernels in cuda/quantize.cuh must give the same bits (dev/cuda/quantize.cu checks them).
//
// A run of n values is cut into blocks of ZQ_BLOCK values; the last block of a run may
// be shorter. Each block gets one fp32 scale, its largest magnitude over the largest
// code, and each value becomes the nearest code (ties to even), so the error of a value
// is at most half a scale. One scale per tensor would let a single outlier wipe out
// every small value; the paper reports that blocks cut the error of int8 weights by
// about 3x. ZQ_BLOCK 256 keeps the scales small (4 bytes per 256: 1.6% of int8, 3.1%
// of int4) while an outlier coarsens only its own 256 values. DeepSpeed's kernels take
// a number of groups per tensor instead; the bytes on the wire are the same kind.
//
// A quantized run is one message: the codes (int8, or int4 two to a byte, low nibble
// first), then the scales. Codes are symmetric, -127..127 and -7..7, so zero is exact
// and a block quantizes the same whatever its sign. Every rank runs the same arithmetic
// on the same bits, so every rank dequantizes the same values.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define ZQ_BLOCK 256
#define ZQ_BLOCK_TEXT "256"

static size_t zq_blocks(size_t n) { return (n + ZQ_BLOCK - 1) / ZQ_BLOCK; }
// bytes of a quantized run of n values (n even), codes then scales
static size_t zq_bytes(size_t n, int bits) { return n * (size_t)bits / 8 + sizeof(float) * zq_blocks(n); }
static int zq_qmax(int bits) { return bits == 8 ? 127 : 7; }

static int8_t zq_code_at(const uint8_t *codes, size_t i, int bits) {
    if (bits == 8) return (int8_t)codes[i];
    uint8_t b = codes[i / 2];
    return (int8_t)((int8_t)(uint8_t)((i & 1 ? b >> 4 : b) << 4) >> 4);   // the nibble, sign-extended
}

// Block k of x[0..n) into out, a run's message; adds its squared error and squares to sums.
static void zq_quantize_block(const float *x, size_t n, int bits, uint8_t *out, size_t k, double sums[2]) {
    size_t lo = k * ZQ_BLOCK, hi = lo + ZQ_BLOCK < n ? lo + ZQ_BLOCK : n;
    float amax = 0;
    for (size_t i = lo; i < hi; i++) amax = fmaxf(amax, fabsf(x[i]));
    int qmax = zq_qmax(bits);
    float scale = amax / (float)qmax;
    ((float *)(out + n * (size_t)bits / 8))[k] = scale;
    for (size_t i = lo; i < hi; i++) {
        float q = scale > 0 ? rintf(x[i] / scale) : 0.0f;   // rintf: to nearest, ties to even
        q = fminf(fmaxf(q, (float)-qmax), (float)qmax);
        if (bits == 8) out[i] = (uint8_t)(int8_t)q;
        else if (i & 1) out[i / 2] |= (uint8_t)(((int)q & 15) << 4);
        else out[i / 2] = (uint8_t)((int)q & 15);
        float d = x[i] - q * scale;
        sums[0] += (double)d * d; sums[1] += (double)x[i] * x[i];
    }
}

// x[0..n) into out, zq_bytes(n, bits); the blocks are independent of the threads' order.
static void zq_quantize(const float *x, size_t n, int bits, uint8_t *out, double sums[2]) {
    double err2 = 0, x2 = 0;
    #pragma omp parallel for reduction(+ : err2, x2)
    for (size_t k = 0; k < zq_blocks(n); k++) {
        double b[2] = {0, 0};
        zq_quantize_block(x, n, bits, out, k, b);
        err2 += b[0]; x2 += b[1];
    }
    sums[0] += err2; sums[1] += x2;
}

// A message of n values back to fp32: into y, or added to y (add), so that a reduction
// sums the ranks' dequantized values in fp32, in the order it calls this.
static void zq_dequantize(const uint8_t *in, size_t n, int bits, float *y, int add) {
    const float *scale = (const float *)(in + n * (size_t)bits / 8);
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float v = (float)zq_code_at(in, i, bits) * scale[i / ZQ_BLOCK];
        y[i] = add ? y[i] + v : v;
    }
}
