// dev/cuda/emu/cublasLt.h: cuBLASLt on the CPU, as far as cuda/matmul.cuh calls it: descriptors,
// layouts and preferences as plain records; a heuristic that offers one algorithm for the plain,
// bias and BGRADB epilogues and none for the GELU ones (the launchers then fall back, as on a GPU
// without them); and cublasLtMatmul, a column-major bf16 GEMM with fp32 accumulation in k order.
// It keeps cublasLt.h's documented contract for BGRADB: "Bias gradient vector elements are the
// same type as the output elements", so another bias type fails the call (CUBLAS_STATUS_NOT_SUPPORTED),
// after the heuristic accepted it. g_emu_cublaslt_fail_bgradb makes every BGRADB call fail, to
// check the launcher's fallback; g_emu_cublaslt_calls counts the calls per epilogue.
#pragma once
#include "dev/cuda/emu/cublas_v2.h"

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4, CUBLASLT_EPILOGUE_DGELU = 64 | 128, CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4, CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 10,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 11, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

struct EmuLtDesc { int transa, transb, epilogue, bias_type; const void *bias; };
struct EmuLtLayout { cudaDataType_t type; uint64_t rows, cols; int64_t ld; };
typedef struct EmuCublasLt *cublasLtHandle_t;
typedef EmuLtDesc *cublasLtMatmulDesc_t;
typedef EmuLtLayout *cublasLtMatrixLayout_t;
typedef struct EmuLtPref *cublasLtMatmulPreference_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct { cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state; float wavesCount; int reserved[4]; } cublasLtMatmulHeuristicResult_t;

static int g_emu_cublaslt_fail_bgradb = 0;
static long g_emu_cublaslt_calls[1024];

static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = (cublasLtHandle_t)1; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t, cudaDataType_t) {
    *d = new EmuLtDesc{0, 0, CUBLASLT_EPILOGUE_DEFAULT, -1, NULL};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n) {
    int32_t i = 0;
    memcpy(&i, v, n < 4 ? n : 4);
    if (a == CUBLASLT_MATMUL_DESC_TRANSA) d->transa = i;
    else if (a == CUBLASLT_MATMUL_DESC_TRANSB) d->transb = i;
    else if (a == CUBLASLT_MATMUL_DESC_EPILOGUE) d->epilogue = i;
    else if (a == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) d->bias_type = i;
    else if (a == CUBLASLT_MATMUL_DESC_BIAS_POINTER) memcpy(&d->bias, v, sizeof(d->bias));
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld) {
    *l = new EmuLtLayout{t, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { *p = (cublasLtMatmulPreference_t)1; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                            cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                                            cublasLtMatmulHeuristicResult_t *r, int *returned) {
    const int e = d->epilogue;
    *returned = e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_BGRADB;
    if (*returned) memset(r, 0, sizeof(*r));
    return *returned ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

static inline float emu_lt_load(cudaDataType_t t, const void *p, size_t i) {
    return t == CUDA_R_32F ? ((const float *)p)[i] : (float)((const __nv_bfloat16 *)p)[i];
}
static inline void emu_lt_store(cudaDataType_t t, void *p, size_t i, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((__nv_bfloat16 *)p)[i] = emu_bf16(v);
}

// D[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C (+ bias[m]); BGRADB: bias[j] = sum_k op(B)[k,j]
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A, cublasLtMatrixLayout_t la,
                                            const void *B, cublasLtMatrixLayout_t lb, const void *beta, const void *C, cublasLtMatrixLayout_t lc,
                                            void *D, cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t) {
    const int e = d->epilogue;
    g_emu_cublaslt_calls[e]++;
    if (e == CUBLASLT_EPILOGUE_BGRADB && (g_emu_cublaslt_fail_bgradb || d->bias_type != (int)ld->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    const size_t m = ld->rows, n = ld->cols, k = d->transa ? la->rows : la->cols;
    const float al = *(const float *)alpha, be = *(const float *)beta;
    auto a = [&](size_t i, size_t kk) { return d->transa ? emu_lt_load(la->type, A, i * la->ld + kk) : emu_lt_load(la->type, A, kk * la->ld + i); };
    auto b = [&](size_t kk, size_t j) { return d->transb ? emu_lt_load(lb->type, B, kk * lb->ld + j) : emu_lt_load(lb->type, B, j * lb->ld + kk); };
    std::vector<float> out(m * n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) {
            float acc = 0.0f;
            for (size_t kk = 0; kk < k; kk++) acc += a(i, kk) * b(kk, j);
            float v = al * acc + (be != 0.0f ? be * emu_lt_load(lc->type, C, j * lc->ld + i) : 0.0f);
            if (e == CUBLASLT_EPILOGUE_BIAS) v += emu_lt_load((cudaDataType_t)d->bias_type, d->bias, i);
            out[j * m + i] = v;
        }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) emu_lt_store(ld->type, D, j * ld->ld + i, out[j * m + i]);
    if (e == CUBLASLT_EPILOGUE_BGRADB)
        for (size_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (size_t kk = 0; kk < k; kk++) s += b(kk, j);
            emu_lt_store((cudaDataType_t)d->bias_type, (void *)d->bias, j, s);
        }
    return CUBLAS_STATUS_SUCCESS;
}
