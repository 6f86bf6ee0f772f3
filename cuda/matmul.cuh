// cuda/matmul.cuh: linear layers through cuBLASLt, floatX (bf16 or fp16) in/out, fp32 compute and accumulate.
//
//   forward:  out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC])
//             with pre_gelu != NULL: pre_gelu = that, out = GELU_tanh(that)
//             (CUBLASLT_EPILOGUE_GELU_AUX_BIAS: one pass instead of three)
//   backward: dinp[N,C]      = dout[N,OC] @ weight[OC,C]           (overwritten)
//             with pre_gelu != NULL: dinp *= GELU'(pre_gelu)      (CUBLASLT_EPILOGUE_DGELU)
//             dweight[OC,C] += dout^T @ inp                        (beta = 1: accumulates)
//             dbias[OC]     += sum_n dout[n,:]                     (own kernel, deterministic)
// The bias gradient is a separate column-sum kernel (per-block partials over row slices,
// summed in a fixed order), one more pass over dout. With g_matmul_bias_grad_epilogue = 1
// (--bias-grad-epilogue 1, opt-in until a GPU run validates it) the dweight GEMM computes it on
// the way instead, in cuBLASLt's BGRADB epilogue (the column sums of its B operand, dout, over
// the GEMM's k = N): the epilogue overwrites, so it writes into scratch and a small kernel adds
// that to dbias. The epilogue writes the bias gradient in the output type (cublasLt.h: "Bias
// gradient vector elements are the same type as the output elements"), so the sum is rounded to
// bf16 once before the add, and cuBLASLt sums the N rows in an order of its own: not bitwise the
// kernel's result, within a bf16 rounding or two (dev/cuda/matmul checks it); run to run it is as
// deterministic as cuBLAS's GEMMs are (same GPU model and library version). If cublasLtMatmul
// itself fails on a BGRADB plan the heuristic accepted, one line says so and the column-sum kernel
// computes every bias gradient from then on.
// If cuBLASLt finds no algorithm for a fused epilogue, the launcher falls back to a plain
// matmul plus the gelu.cuh kernels (same results within bf16 rounding).
//
// Row-major to cuBLAS column-major: a row-major [R, K] array is a column-major [K, R] matrix,
// so out^T[OC,N] = weight[OC,C] (stored [C,OC]: op T) x inp^T[C,N] (op N).
//
// Global state: matmul_setup() creates the cuBLASLt and cuBLAS handles and a 32 MiB
// cuBLASLt workspace; the cuBLASLt plans (descriptors, layouts, the chosen algorithm) are
// cached per call shape (below); matmul_teardown() frees all of it. The handles and the plan
// table are used from one host thread; the workspace must not be shared by matmuls running
// concurrently on two streams.
#pragma once
#include "cuda/common.cuh"
#include "cuda/sizes.h"
#include "cuda/gelu.cuh"

static cublasLtHandle_t g_cublaslt_handle = NULL;
static cublasHandle_t g_cublas_handle = NULL;
static void *g_cublaslt_workspace = NULL;
static size_t g_cublaslt_workspace_size = 0;
// 1: use the cuBLASLt GELU epilogues when asked for a GELU; 0: always the separate kernels
static int g_matmul_gelu_fusion = 1;
// times a fused GELU/DGELU epilogue was asked for but cuBLASLt had no algorithm (the unfused
// fallback ran instead); dev/cuda/matmul prints it
static long g_matmul_gelu_fallbacks = 0;
// 1: the bias gradient from the dweight GEMM's BGRADB epilogue (above); 0: the column-sum kernel
static int g_matmul_bias_grad_epilogue = 0;
// times the epilogue was asked for but cuBLASLt had no algorithm (the kernel ran instead), and the
// type it wrote the bias gradient in the last time it could (CUDA_R_FLOATX; -1: never)
static long g_matmul_bias_grad_fallbacks = 0;
static int g_matmul_bias_grad_type = -1;
// the status of a cublasLtMatmul that failed on a BGRADB plan (the epilogue is then off); 0: none
static int g_matmul_bias_grad_failed = 0;

static void matmul_setup(void) {
    if (g_cublaslt_handle) return;
    cublasCheck(cublasLtCreate(&g_cublaslt_handle));
    cublasCheck(cublasCreate(&g_cublas_handle));
    g_cublaslt_workspace_size = CUBLASLT_WORKSPACE_BYTES;
    cudaCheck(cudaMalloc(&g_cublaslt_workspace, g_cublaslt_workspace_size));
}

static void matmul_plans_free(void);
static void matmul_teardown(void) {
    matmul_plans_free();
    if (g_cublaslt_workspace) cudaCheck(cudaFree(g_cublaslt_workspace));
    if (g_cublaslt_handle) cublasCheck(cublasLtDestroy(g_cublaslt_handle));
    if (g_cublas_handle) cublasCheck(cublasDestroy(g_cublas_handle));
    g_cublaslt_workspace = NULL;
    g_cublaslt_handle = NULL;
    g_cublas_handle = NULL;
    g_cublaslt_workspace_size = 0;
}

// Largest power of two (at most 256) dividing the address: what cuBLASLt may assume about a
// matrix pointer. The heuristic never sees the A/B/C/D pointers and by default
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES = 256) assumes 256-byte alignment, so an
// algorithm it returns may reject or misread a matrix that is only 16-byte aligned (weights and
// activations at tensor/layer offsets inside one allocation, e.g. --dim 64). PyTorch and
// TransformerEngine pass the real alignment the same way.
static uint32_t matmul_ptr_alignment(const void *p) {
    uint32_t al = 256;
    while (al > 1 && ((uintptr_t)p % al) != 0) al /= 2;
    return al;
}

// ----------------------------------------------------------------------------
// cuBLASLt plans, cached per call shape
//
// A plan is what cublasLtMatmul needs besides the data: the operation descriptor (transposes,
// epilogue, bias type, aux leading dimension), the four matrix layouts and the algorithm the
// heuristic chose. Building one (five descriptors and cublasLtMatmulAlgoGetHeuristic) costs
// host time on every call; a training micro-step makes the same few dozen distinct calls over
// and over, so the plans are kept in a small table, keyed by everything the heuristic sees:
//   m, n, k, transA, transB, the epilogue (which says bias or not), the bias vector's type, and the alignment
//   (matmul_ptr_alignment) of the A, B and D (= C) pointers, told to the heuristic through the
//   preference, and of the bias and aux pointers: those two are descriptor attributes, and
//   cublasLt.h says routines that do not dereference them, like the heuristic, use their values
//   for the expected alignment.
// Data types, compute type and workspace size are fixed for the process; no call is batched.
// What is per call: the A, B, C, D pointers and alpha/beta (accumulate) are arguments of
// cublasLtMatmul; the bias and aux pointers are set on the cached descriptor right before the
// call (cublasLtMatmul reads the descriptor when called, nothing enqueued refers to it later).
// The same key gives the heuristic the same inputs, so a cached call runs the algorithm an
// uncached call would choose: results are bitwise equal (dev/cuda/matmul checks it).
//
// g_matmul_cache = 0 (the default, as first measured on a GPU; train_gpt sets it once at start-up
// from --plan-cache): a plan is built and destroyed on every call. The table holds MATMUL_PLAN_SLOTS
// plans (open addressing); when it is full, a new shape runs uncached (counted in
// g_matmul_plans_uncached). matmul_teardown frees them.
#define MATMUL_PLAN_SLOTS 256
static int g_matmul_cache = 0;
// the cache at work, for dev/cuda/matmul: heuristic runs, calls served by a cached plan,
// calls that found the table full
static long g_matmul_heuristic_runs = 0, g_matmul_plan_hits = 0, g_matmul_plans_uncached = 0;

// every field 32 bits: no padding, so keys compare with memcmp
typedef struct {
    int32_t m, n, k, transA, transB, epilogue;                 // epilogue: a cublasLtEpilogue_t
    int32_t bias_type;                                         // the bias (gradient) vector's cudaDataType_t; -1: none
    uint32_t align_a, align_b, align_d, align_bias, align_aux; // bytes; 0: no such pointer
} MatmulKey;

typedef struct {
    int used;                                 // a slot of the table holding a plan
    MatmulKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t A, B, C, D;
    cublasLtMatmulAlgo_t algo;
    int has_algo;                             // 0: cuBLASLt has no algorithm for this key
} MatmulPlan;

static MatmulPlan g_matmul_plans[MATMUL_PLAN_SLOTS];

// The descriptors and the heuristic's algorithm for key; bias and aux: this call's pointers
// (their alignment is in the key). A cuBLAS error other than "no algorithm" exits.
static void matmul_plan_build(MatmulPlan *p, const MatmulKey *key, const void *bias, const floatX *aux) {
    const int m = key->m, n = key->n, k = key->k;
    memset(p, 0, sizeof(*p));
    p->key = *key;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, key->transA ? &opT : &opN, sizeof(opT)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, key->transB ? &opT : &opN, sizeof(opN)));
    if (key->transA) cublasCheck(cublasLtMatrixLayoutCreate(&p->A, CUDA_R_FLOATX, k, m, k));
    else cublasCheck(cublasLtMatrixLayoutCreate(&p->A, CUDA_R_FLOATX, m, k, m));
    if (key->transB) cublasCheck(cublasLtMatrixLayoutCreate(&p->B, CUDA_R_FLOATX, n, k, n));
    else cublasCheck(cublasLtMatrixLayoutCreate(&p->B, CUDA_R_FLOATX, k, n, k));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->C, CUDA_R_FLOATX, m, n, m));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->D, CUDA_R_FLOATX, m, n, m));
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)key->epilogue;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias) {
        cudaDataType_t bt = (cudaDataType_t)key->bias_type;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux) {
        int64_t ld = m;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    }
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &g_cublaslt_workspace_size, sizeof(g_cublaslt_workspace_size)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key->align_a, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key->align_b, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key->align_d, sizeof(uint32_t)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key->align_d, sizeof(uint32_t)));
    cublasLtMatmulHeuristicResult_t heur;
    memset(&heur, 0, sizeof(heur));
    int returned = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_cublaslt_handle, p->desc, p->A, p->B, p->C, p->D, pref, 1, &heur, &returned);
    g_matmul_heuristic_runs++;
    if (st == CUBLAS_STATUS_SUCCESS && returned > 0) {
        p->algo = heur.algo;
        p->has_algo = 1;
    } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
        cublasCheck(st);
    }
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
}

static void matmul_plan_destroy(MatmulPlan *p) {
    cublasCheck(cublasLtMatrixLayoutDestroy(p->A));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->B));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->C));
    cublasCheck(cublasLtMatrixLayoutDestroy(p->D));
    cublasCheck(cublasLtMatmulDescDestroy(p->desc));
    memset(p, 0, sizeof(*p));
}

// The cached plan for key, built on its first use; NULL when the table is full.
static MatmulPlan *matmul_plan_cached(const MatmulKey *key, const void *bias, const floatX *aux) {
    uint32_t h = 2166136261u;   // FNV-1a over the key's bytes
    const unsigned char *b = (const unsigned char *)key;
    for (size_t i = 0; i < sizeof(*key); i++) h = (h ^ b[i]) * 16777619u;
    for (int probe = 0; probe < MATMUL_PLAN_SLOTS; probe++) {
        MatmulPlan *p = &g_matmul_plans[(h + probe) % MATMUL_PLAN_SLOTS];
        if (!p->used) {
            matmul_plan_build(p, key, bias, aux);
            p->used = 1;
            return p;
        }
        if (!memcmp(&p->key, key, sizeof(*key))) {
            g_matmul_plan_hits++;
            return p;
        }
    }
    g_matmul_plans_uncached++;
    return NULL;
}

static void matmul_plans_free(void) {
    for (int i = 0; i < MATMUL_PLAN_SLOTS; i++)
        if (g_matmul_plans[i].used) matmul_plan_destroy(&g_matmul_plans[i]);
}

// Column-major D[m,n] = op(A)[m,k] op(B)[k,n] (+ bias[m]) (+ D if accumulate), floatX storage.
// A is stored [k,m] (ld k) when transA, else [m,k] (ld m); B is stored [n,k] (ld n) when
// transB, else [k,n] (ld k); D is [m,n] (ld m).
// epilogue: 0 none/bias, 1 GELU forward (aux = pre-GELU written, ld m), 2 DGELU (aux read),
// 3 BGRADB (bias = the column sums of op(B) over k written, n of them). bias_type: the bias
// vector's element type (CUDA_R_FLOATX: the output type, which the bias gradient must have).
// Returns 1 on success, 0 when cuBLASLt has no algorithm for this combination, and for BGRADB -1
// when cublasLtMatmul itself failed (nothing written; the status in g_matmul_bias_grad_failed);
// any other cuBLAS error exits.
static int matmul_cublaslt_try(floatX *d, const floatX *a, const floatX *b, const void *bias, cudaDataType_t bias_type,
                               int m, int n, int k, int transA, int transB, int accumulate,
                               floatX *aux, int epilogue, cudaStream_t stream) {
    CUDA_REQUIRE(g_cublaslt_handle != NULL);  // call matmul_setup() first
    // epilogue vectors/matrices: the heuristic reads their pointer values for alignment, and
    // under-aligned bias pointers have been reported to fault; all zeroc buffers are 16-aligned
    CUDA_REQUIRE(bias == NULL || is_aligned16(bias));
    const int uses_aux = epilogue == 1 || epilogue == 2;
    CUDA_REQUIRE(!uses_aux || (aux != NULL && is_aligned16(aux) && m % 8 == 0));  // AUX_LD = m, divisible by 8
    if (epilogue == 2) CUDA_REQUIRE(bias == NULL);
    if (epilogue == 3) CUDA_REQUIRE(bias != NULL);
    if (!uses_aux) aux = NULL;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (epilogue == 1) epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    else if (epilogue == 2) epi = CUBLASLT_EPILOGUE_DGELU;
    else if (epilogue == 3) epi = CUBLASLT_EPILOGUE_BGRADB;
    else if (bias) epi = CUBLASLT_EPILOGUE_BIAS;
    MatmulKey key = {m, n, k, transA != 0, transB != 0, (int32_t)epi, bias ? (int32_t)bias_type : -1,
                     matmul_ptr_alignment(a), matmul_ptr_alignment(b), matmul_ptr_alignment(d),
                     bias ? matmul_ptr_alignment(bias) : 0, aux ? matmul_ptr_alignment(aux) : 0};
    MatmulPlan once, *p = g_matmul_cache ? matmul_plan_cached(&key, bias, aux) : NULL;
    if (!p) {
        p = &once;
        matmul_plan_build(p, &key, bias, aux);
    }
    int ok = p->has_algo;
    if (ok) {
        // this call's epilogue pointers on the (possibly cached) descriptor
        if (bias) cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        if (aux) cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
        cublasStatus_t st = cublasLtMatmul(g_cublaslt_handle, p->desc, &alpha, a, p->A, b, p->B, &beta, d, p->C, d, p->D,
                                           &p->algo, g_cublaslt_workspace, g_cublaslt_workspace_size, stream);
        if (st != CUBLAS_STATUS_SUCCESS && epilogue == 3) {
            g_matmul_bias_grad_failed = (int)st;
            ok = -1;
        } else {
            cublasCheck(st);
        }
    }
    if (p == &once) matmul_plan_destroy(p);
    return ok;
}

// the same, exiting with a one-line error when no algorithm exists
static void matmul_cublaslt(floatX *d, const floatX *a, const floatX *b, const floatX *bias,
                            int m, int n, int k, int transA, int transB, int accumulate, cudaStream_t stream) {
    if (!matmul_cublaslt_try(d, a, b, bias, CUDA_R_FLOATX, m, n, k, transA, transB, accumulate, NULL, 0, stream)) {
        fprintf(stderr, "error: cuBLASLt: no algorithm for m=%d n=%d k=%d transA=%d transB=%d bias=%d\n",
                m, n, k, transA, transB, bias != NULL);
        exit(1);
    }
}

// ----------------------------------------------------------------------------
// bias gradient: dbias[OC] += sum_n dout[n, OC], deterministic


// block (32, 8): x covers 32 * 8 = 256 columns (8 per thread), y and blockIdx.y split the rows.
// direct: add the block's column sums to dbias (gridDim.y == 1), else write partial[blockIdx.y][OC].
__global__ void matmul_dbias_kernel(float *partial, floatX *dbias, const floatX *__restrict__ dout,
                                    int N, int OC, int direct) {
    __shared__ float s[8][32][9];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = (blockIdx.x * 32 + tx) * 8;
    float acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = 0.0f;
    if (c < OC) {
        for (int row = blockIdx.y * 8 + ty; row < N; row += gridDim.y * 8) {
            x128 d = load128(dout + (size_t)row * OC + c);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += bf2f(d[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) s[ty][tx][k] = acc[k];
    __syncthreads();
    if (ty == 0 && c < OC) {
        float tot[8];
#pragma unroll
        for (int k = 0; k < 8; k++) tot[k] = 0.0f;
        for (int y = 0; y < 8; y++) {
#pragma unroll
            for (int k = 0; k < 8; k++) tot[k] += s[y][tx][k];
        }
        if (direct) {
            x128 old = load128(dbias + c);
            x128 o;
#pragma unroll
            for (int k = 0; k < 8; k++) o[k] = f2bf(bf2f(old[k]) + tot[k]);
            store128(dbias + c, o);
        } else {
            float *p = partial + (size_t)blockIdx.y * OC + c;
#pragma unroll
            for (int k = 0; k < 8; k++) p[k] = tot[k];
        }
    }
}

__device__ __forceinline__ float matmul_f32(float x) { return x; }
__device__ __forceinline__ float matmul_f32(floatX x) { return bf2f(x); }

// dbias[c] += the sum of G partial rows (fp32: the kernel's splits; or one row the BGRADB
// epilogue wrote, fp32 or floatX)
template <class P>
__global__ void matmul_dbias_reduce_kernel(floatX *dbias, const P *__restrict__ partial, int G, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float acc = 0.0f;
    for (int g = 0; g < G; g++) acc += matmul_f32(partial[(size_t)g * OC + c]);
    dbias[c] = f2bf(bf2f(dbias[c]) + acc);
}

// floats of scratch matmul_backward needs for the bias gradient of width OC: matmul_dbias_scratch_floats (cuda/sizes.h)

// dbias[OC] += column sums of dout[N, OC]. scratch: matmul_dbias_scratch_floats(OC) floats
// (may be NULL when the grid needs no split, but pass it).
static void matmul_dbias(floatX *dbias, float *scratch, const floatX *dout, int N, int OC, cudaStream_t stream) {
    if (N <= 0) return;
    CUDA_REQUIRE(OC % 8 == 0);
    CUDA_REQUIRE(is_aligned16(dbias) && is_aligned16(dout));
    const int gx = (int)ceil_div(OC, 256);
    int gy = (2 * cuda_num_sms()) / gx;
    if (gy > MATMUL_DBIAS_MAX_SPLITS) gy = MATMUL_DBIAS_MAX_SPLITS;
    if (gy > (int)ceil_div(N, 8)) gy = (int)ceil_div(N, 8);
    if (gy < 1) gy = 1;
    if (scratch == NULL) gy = 1;
    dim3 grid(gx, gy), block(32, 8);
    matmul_dbias_kernel<<<grid, block, 0, stream>>>(scratch, dbias, dout, N, OC, gy == 1);
    cudaCheckLaunch();
    if (gy > 1) {
        matmul_dbias_reduce_kernel<float><<<(int)ceil_div(OC, 256), 256, 0, stream>>>(dbias, scratch, gy, OC);
        cudaCheckLaunch();
    }
}

// dweight[OC,C] += dout^T inp as matmul_backward computes it, with dbias[OC] += the column sums
// of dout from the same GEMM's BGRADB epilogue (written into scratch as floatX, then added).
// Returns 1 when done; having written nothing, 0 when cuBLASLt has no algorithm, and -1 when
// cublasLtMatmul failed: then one line says so and the epilogue is off for the rest of the run.
static int matmul_dweight_dbias_epilogue(floatX *dweight, floatX *dbias, float *scratch, const floatX *inp,
                                         const floatX *dout, int N, int C, int OC, cudaStream_t stream) {
    int r = matmul_cublaslt_try(dweight, inp, dout, scratch, CUDA_R_FLOATX, C, OC, N, 0, 1, 1, NULL, 3, stream);
    if (r < 0) {
        (void)cudaGetLastError();   // a launch error cuBLASLt left behind belongs to the failed call
        g_matmul_bias_grad_epilogue = 0;
        fprintf(stderr, "note: --bias-grad-epilogue: cublasLtMatmul failed (%s) on a BGRADB plan the heuristic accepted "
                "(m=%d n=%d k=%d); the column-sum kernel computes the bias gradients from now on\n",
                cublas_status_string((cublasStatus_t)g_matmul_bias_grad_failed), C, OC, N);
    }
    if (r <= 0) return r;
    g_matmul_bias_grad_type = CUDA_R_FLOATX;
    matmul_dbias_reduce_kernel<floatX><<<(int)ceil_div(OC, 256), 256, 0, stream>>>(dbias, (const floatX *)scratch, 1, OC);
    cudaCheckLaunch();
    return 1;
}

// ----------------------------------------------------------------------------
// public entry points

// out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC], may be NULL).
// pre_gelu != NULL: pre_gelu[N,OC] = the above and out = GELU_tanh(pre_gelu) (OC % 8 == 0).
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias,
                           int N, int C, int OC, floatX *pre_gelu, cudaStream_t stream) {
    if (N <= 0) return;
    if (pre_gelu) {
        CUDA_REQUIRE(OC % 8 == 0);
        if (g_matmul_gelu_fusion &&
            matmul_cublaslt_try(out, weight, inp, bias, CUDA_R_FLOATX, OC, N, C, 1, 0, 0, pre_gelu, 1, stream))
            return;
        if (g_matmul_gelu_fusion) g_matmul_gelu_fallbacks++;
        matmul_cublaslt(pre_gelu, weight, inp, bias, OC, N, C, 1, 0, 0, stream);
        gelu_forward(out, pre_gelu, (size_t)N * OC, stream);
        return;
    }
    matmul_cublaslt(out, weight, inp, bias, OC, N, C, 1, 0, 0, stream);
}

// Backward of matmul_forward (without its GELU: that belongs to the layer before, see pre_gelu).
//   dinp[N,C] = dout[N,OC] @ weight[OC,C]        overwritten; skipped when dinp == NULL
//     pre_gelu != NULL: inp was GELU(pre_gelu[N,C]); dinp is multiplied by GELU'(pre_gelu),
//     so it is the gradient of pre_gelu (fused as CUBLASLT_EPILOGUE_DGELU)
//   dweight[OC,C] += dout^T @ inp                skipped when dweight == NULL
//   dbias[OC] += sum_n dout                      skipped when dbias == NULL; dbias_scratch:
//                                                matmul_dbias_scratch_floats(OC) floats
//     g_matmul_bias_grad_epilogue = 1 (and dweight, dbias_scratch given): from the dweight
//     GEMM's epilogue (matmul_dweight_dbias_epilogue), else the column-sum kernel
static void matmul_backward(floatX *dinp, floatX *dweight, floatX *dbias, float *dbias_scratch,
                            const floatX *dout, const floatX *inp, const floatX *weight,
                            int N, int C, int OC, const floatX *pre_gelu, cudaStream_t stream) {
    if (N <= 0) return;
    int dweight_dbias_done = 0;
    if (dbias && dweight && dbias_scratch && g_matmul_bias_grad_epilogue) {
        int r = matmul_dweight_dbias_epilogue(dweight, dbias, dbias_scratch, inp, dout, N, C, OC, stream);
        if (r == 0) g_matmul_bias_grad_fallbacks++;
        dweight_dbias_done = r > 0;
    }
    if (dbias && !dweight_dbias_done) matmul_dbias(dbias, dbias_scratch, dout, N, OC, stream);
    if (dinp) {
        // column-major dinp^T[C,N] = weight^T[C,OC] (stored [OC rows of C]: ld C, op N) x dout^T[OC,N] (op N)
        int done = 0;
        if (pre_gelu) {
            CUDA_REQUIRE(C % 8 == 0);
            if (g_matmul_gelu_fusion)
                done = matmul_cublaslt_try(dinp, weight, dout, NULL, CUDA_R_FLOATX, C, N, OC, 0, 0, 0, (floatX *)pre_gelu, 2, stream);
            if (!done) {
                if (g_matmul_gelu_fusion) g_matmul_gelu_fallbacks++;
                matmul_cublaslt(dinp, weight, dout, NULL, C, N, OC, 0, 0, 0, stream);
                gelu_backward(dinp, pre_gelu, dinp, (size_t)N * C, stream);
                done = 1;
            }
        } else {
            matmul_cublaslt(dinp, weight, dout, NULL, C, N, OC, 0, 0, 0, stream);
        }
    }
    if (dweight && !dweight_dbias_done) {
        // column-major dweight^T[C,OC] += inp^T[C,N] (op N, ld C) x dout[N,OC] (stored [OC,N] col-major: op T)
        matmul_cublaslt(dweight, inp, dout, NULL, C, OC, N, 0, 1, 1, stream);
    }
}
