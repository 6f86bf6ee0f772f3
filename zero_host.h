// zero_host.h: zero.h's data-movement primitives for the CPU trainer. Every
// buffer is ordinary host memory, every collective is MPI and complete when it
// returns (or when it is waited for), the fp32 parameters are themselves the
// master weights, and the optimizer is CPU-Adam (adamw.cuh). zero_device.cuh
// implements the same calls for the GPU trainer.
//
//   zb_init / zb_destroy                  the primitives' own state (and the offload staging zero.h allocated)
//   zb_alloc / zb_free                    a zeroed buffer (ZMEM_WORK or ZMEM_HOST: the same here)
//   zb_fill, zb_copy                      memset, memcpy (queued on the GPU)
//   zb_upload, zb_download                to / from host memory, complete on return
//   zb_upload_floatX                      fp32 host values into a floatX buffer
//   zb_accumulate_reduced                 acc (+)= a reduced slice, once its collective is done
//   zb_grad_slice_final                   a gradient slice is final (offload copies it to the host)
//   zb_slot_acquire / zb_slot_release     a gradient slot is reused only after its reduction
//   zb_wait_collectives                   everything the collectives produced is visible
//   zb_sumsq_add / zb_sumsq_take          the squared global norm, segment by segment
//   zb_adamw                              AdamW on one segment of this rank's partition
//   zb_device_memory                      the accelerator's used / total bytes (none here)
#pragma once

#define ZPARAM_DT DT_F32
#define ZERO_SEPARATE_MASTER 0   // the fp32 parameters are the master weights

typedef struct {
    Comm *comm;
    double sumsq;                // zb_sumsq_add's running sum
} ZeroBackend;

static void zb_init(ZeroBackend *b, Comm *comm, int n_slots, void *staging_grad, void *staging_params) {
    b->comm = comm;
    b->sumsq = 0;
}
static void zb_destroy(ZeroBackend *b) {}

static void *zb_alloc(ZeroBackend *b, size_t bytes, int where, const char *what) {
    return xcalloc(bytes, what);
}
static void zb_free(ZeroBackend *b, void *p, int where) { free(p); }

static void zb_fill(ZeroBackend *b, void *p, int byte, size_t bytes) { memset(p, byte, bytes); }
static void zb_copy(ZeroBackend *b, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void zb_upload(ZeroBackend *b, void *dst, const void *host, size_t bytes) { memcpy(dst, host, bytes); }
static void zb_download(ZeroBackend *b, void *host, const void *src, size_t bytes) { memcpy(host, src, bytes); }
static void zb_upload_floatX(ZeroBackend *b, floatX *dst, const float *host, size_t n) { memcpy(dst, host, n * sizeof(float)); }

// A reduce-scatter was started into src: wait for it, then add the slice into
// the fp32 accumulator (the first micro-step of a step copies).
static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, const floatX *src, size_t n, int first) {
    comm_wait(b->comm, r);
    if (first) memcpy(acc, src, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) acc[i] += src[i];
}

// the optimizer reads the slice where it is
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, const zgrad_t *slice, size_t n) {}
static void zb_slot_acquire(ZeroBackend *b, int slot) {}   // collectives here finish before
static void zb_slot_release(ZeroBackend *b, int slot) {}   // the call that started them returns
static void zb_wait_collectives(ZeroBackend *b) {}

// Squares summed in double, per segment (OpenMP's reduction: the same bits for
// the same thread count).
static void zb_sumsq_add(ZeroBackend *b, const zgrad_t *g, size_t n) {
    double acc = 0;
    #pragma omp parallel for reduction(+:acc)
    for (size_t i = 0; i < n; i++) acc += (double)g[i] * g[i];
    b->sumsq += acc;
}
static double zb_sumsq_take(ZeroBackend *b) { double s = b->sumsq; b->sumsq = 0; return s; }

// AdamW on n elements of this rank's partition (shard offset so): the master is
// the parameter slice itself, so there is no separate output to write.
static void zb_adamw(ZeroBackend *b, size_t so, float *master, const zgrad_t *grad, float *m, float *v, floatX *param_out,
                     size_t n, AdamWParams ap) {
    adamw_cpu_step(master, grad, m, v, NULL, n, ap);
}

static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total) { *used = *total = 0; return 0; }
