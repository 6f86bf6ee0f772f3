// zero/backend.h: what zero.h and its two backends share: the types of the
// primitives' interface, and the list of the primitives. zero/host.h implements
// them for the CPU trainer (plain memory, MPI), zero/device.cuh for the GPU
// trainer (device memory, streams, NCCL or host-staged MPI). The primitives are
// named zb_*. Each backend also sets ZPARAM_DT (the datatype parameters and
// gradients travel in) and two switches, ZERO_ONE_RANK_IN_PLACE and
// ZERO_GRADS_FIRST_WRITE, that zero.h reads.
//
//   zb_init / zb_destroy                  the primitives' own state: the offload staging, the NVMe files
//   zb_alloc / zb_free                    a zeroed buffer in working memory or (GPU) pinned host memory
//   zb_fill, zb_copy                      memset, memcpy (queued on the GPU)
//   zb_upload, zb_download                to / from host memory, complete on return
//   zb_upload_floatX                      fp32 host values into a floatX buffer
//   zb_grads_stored                       a backward step wrote these gradients (floatX storage)
//   zb_accumulate_reduced                 acc (+)= a reduced slice, once its collective is done
//   zb_grad_slice_final                   a gradient slice is final (offload copies it to the host)
//   zb_slot_acquire / zb_slot_release     a gradient slot is reused only after its reduction
//   zb_wait_collectives                   everything the collectives produced is visible
//   zb_sync                               every queued operation is done (the step line's --breakdown)
//   zb_sumsq_add / zb_sumsq_take          the squared global norm, segment by segment
//   zb_state_init                         where the partition's state planes are (memory or NVMe: zero/state.h)
//   zb_state_read / zb_state_write        a range of a state plane (master, m, v, stage 3's parameter shard)
//   zb_state_write_floatX                 fp32 values into stage 3's NVMe parameter shard, as floatX
//   zb_adamw_partition                    AdamW on this rank's partition, segment by segment in shard order
//   zb_lean_init / zb_lean_sumsq / zb_lean_adamw   the GPU's lean step: the norm and AdamW over the whole
//                                         partition, one launch each. The CPU declines it and walks the segments.
//   zb_param_read_ahead / zb_param_slice_to   stage 3: a unit's slice of the parameter shard into the
//                                         gather arena (from NVMe: read one unit ahead)
//   zb_quantize / zb_dequantize           ZeRO++: blocks of values to int8 or int4 messages and back (util/quantize.h)
//   zb_scale_to_floatX / zb_quant_errors  ZeRO++: qgZ's averaged fp32 sum as floatX; the worst block errors
//   zb_nvme_stats                         ZeRO-Infinity's I/O since the last call
//   zb_device_memory                      the accelerator's used / total bytes (none on the CPU)
#pragma once
#include "comm/comm.h"
#include "config/train_config.h"
#include "adamw.cuh"

// The reduced gradient of a partition: the full gradient buffer's slice (stages
// 0-1, floatX) or the fp32 gradient shard (stages 2-3).
#if ZERO_STAGE <= 1
typedef floatX zgrad_t;
#else
typedef float zgrad_t;
#endif

// kinds of memory, as the reports count them
enum { MEM_PARAMS = 0, MEM_GRADS, MEM_OPTIM, MEM_GATHER, MEM_GRAD_BUCKETS, MEM_ACTIVATIONS, MEM_SCRATCH, MEM_KV_CACHE,
       MEM_NVME_BUFFERS, N_MEM };
static const char *const MEM_NAMES[N_MEM] = {"params", "grads", "optimizer", "gathered_params", "grad_buckets", "activations",
                                            "scratch", "kv_cache", "nvme_buffers"};

// where a buffer lives: the trainer's working memory (the GPU's, or the host's
// for the CPU trainer), host memory (pinned, for offload, on the GPU), or a
// file on NVMe (ZeRO-Infinity: not in memory at all)
enum { ZMEM_WORK = 0, ZMEM_HOST = 1, ZMEM_NVME = 2 };

// AdamW's view of one segment of the partition: its shard offset and length, its
// weight decay, and where its reduced gradient and its working parameters are.
// param is NULL where the parameters are in the NVMe shard, at offset so.
typedef struct { size_t so, n; float weight_decay; const zgrad_t *grad; floatX *param; } ZeroAdamSeg;
// What of the step a backend runs over the whole partition at once (zb_lean_init).
enum { LEAN_NORM = 1, LEAN_ADAMW = 2 };

