// zero/backend.h: the contract of every data movement zero.h makes, kept by zero/host.h with
// host memory and MPI and by zero/device.cuh on the GPU. "Queued": in the compute stream's order.
#pragma once
#include "comm/comm.h"
#include "config/train_config.h"
#include "adamw.cuh"
#include "zero/plan.h"

#if ZERO_STAGE <= 1   // the reduced gradient: the full floatX gradients' slice, then the fp32 shard
typedef floatX zgrad_t;
#else
typedef float zgrad_t;
#endif

enum { ZMEM_WORK = 0, ZMEM_HOST = 1, ZMEM_NVME = 2 };   // a buffer's place: working memory, pinned host, NVMe

// AdamW's view of a segment of the partition; a NULL state is in ZeRO-Infinity's NVMe planes.
// on_device: Twin-Flow's device side, its state in device memory under offload.
typedef struct { size_t shard_off, n; float weight_decay; const zgrad_t *grad; floatX *param; float *master, *m, *v; int on_device; } ZeroAdamSeg;
enum { LEAN_NORM = 1, LEAN_ADAMW = 2 };   // what zb_lean_init says the backend runs in one launch

typedef struct ZeroBackend ZeroBackend;   // each backend's own state
typedef struct ZeroInfinityPlan ZeroInfinityPlan; typedef struct ZeroNvmeStats ZeroNvmeStats;   // zero/infinity.h

// memory
static void zb_init(ZeroBackend *b, Comm *comm, const TrainConfig *cfg, int n_slots, void *staging_grad, void *staging_params, size_t staging_from);   // owns the staging, of the shard from staging_from on
static void zb_destroy(ZeroBackend *b);                                             // frees the staging, closes the NVMe files
static void *zb_alloc(ZeroBackend *b, size_t bytes, int where, const char *what);   // zeroed, ZMEM_WORK or ZMEM_HOST
static void zb_free(ZeroBackend *b, void *p, int where);                            // what zb_alloc gave, NULL allowed
static void zb_fill(ZeroBackend *b, void *p, int byte, size_t bytes);               // memset, queued
static void zb_copy(ZeroBackend *b, void *dst, const void *src, size_t bytes);      // memcpy, queued
static void zb_upload(ZeroBackend *b, void *dst, const void *host, size_t bytes);   // after the queue, complete on return
static void zb_download(ZeroBackend *b, void *host, const void *src, size_t bytes); // after the queue, complete on return
static void zb_upload_floatX(ZeroBackend *b, floatX *dst, const float *host, size_t n);   // rounded to nearest even
static void zb_round_floatX(ZeroBackend *b, floatX *x, size_t n);                   // values as 16 bits store them
// gradients
static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, const floatX *src, size_t n, int first);   // acc (+)= src once r is done
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, zgrad_t *slice, size_t n);   // offload copies it to the host
static void zb_slot_acquire(ZeroBackend *b, int slot);   // queued work waits until the slot's last reduction is done
static void zb_slot_release(ZeroBackend *b, int slot);   // the slot's reduction has been queued
static void zb_wait_collectives(ZeroBackend *b);         // queued work sees everything the collectives produced
static void zb_sync(ZeroBackend *b);                     // every queued operation is done
// the optimizer step
static void zb_sumsq_add(ZeroBackend *b, const zgrad_t *g, size_t n);   // the squared norm += Σ g², queued
static double zb_sumsq_take(ZeroBackend *b);                            // the sum; every queued copy is then done
static void zb_adamw_partition(ZeroBackend *b, const ZeroAdamSeg *seg, int n_seg, AdamWParams ap);   // in shard order
static int zb_lean_init(ZeroBackend *b, const ZeroAdamSeg *runs, int n_runs, const ZeroAdamSeg *seg, int n_seg, size_t shard_elems,
                        uint32_t *decay_mask);   // LEAN_* it will run in one launch; 0 on the CPU
static void zb_lean_sumsq(ZeroBackend *b);                       // zb_sumsq_add over the whole partition
static void zb_lean_adamw(ZeroBackend *b, AdamWParams ap);       // zb_adamw_partition in one launch
static void zb_dpu_take_grad(ZeroBackend *b, ZeroAdamSeg *seg, int n_seg, zgrad_t **copy);   // DPU: segments read *copy, untouched next
// the partition's state planes, in memory or on NVMe (zero/infinity.h)
static void zb_state_init(ZeroBackend *b, const ZeroInfinityPlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
                          void *nvme_buffers, int say);   // opens the planes on NVMe; mem holds the others
static void zb_state_read(ZeroBackend *b, int k, size_t off, size_t n, void *host);         // plane k at shard offset off
static void zb_state_write(ZeroBackend *b, int k, size_t off, size_t n, const void *host);   // complete on return
static void zb_state_write_floatX(ZeroBackend *b, size_t off, float *vals, size_t n);       // into the parameter plane, rounded
// stage 3
static void zb_pass_begin(ZeroBackend *b, const ZeroPlan *p, const int *order, int n);      // the pass's gather order
static void zb_param_slice_to(ZeroBackend *b, floatX *dst, const floatX *src, size_t off, size_t n);   // src NULL: on NVMe
// ZeRO++ (zero/zeropp.h)
static void zb_quantize(ZeroBackend *b, const void *x, int x_floatX, size_t n, int bits, uint8_t *out);   // int8 or int4 blocks
static void zb_dequantize(ZeroBackend *b, const uint8_t *in, size_t n, int bits, void *y, int y_floatX, int add);   // y (+)= values
static void zb_scale_to_floatX(ZeroBackend *b, const float *x, floatX *y, size_t n, float s);   // lands where zb_accumulate_reduced reads
static void zb_quant_sums(ZeroBackend *b, double out[4]);   // int8, int4: squared error, squares; since the last call
// reports
static int zb_nvme_stats(ZeroBackend *b, ZeroNvmeStats *out);            // 0 without NVMe
static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total);   // 0 without a device
