// zero/placement.h: where each model state lives, and the table of buffers that hold
// them. It is arithmetic on the plan: zero_init allocates exactly these buffers, and
// the estimator, train/zero_report.h, adds them up without allocating.
//
//                        CPU trainer, fp32             GPU trainer, floatX: bf16, or fp16
//   params               full or shard; the master     full or shard, the working copy
//   master               the params are the master     fp32 partition
//   grads, stages 0-1    full, fp32                    full, floatX: micro-steps add in floatX
//   grad_shard, 2-3      fp32 accumulator              fp32 accumulator of the reduced slices
//   opt_m, opt_v         fp32 partition                fp32 partition
//
// ZeRO-Offload, Ren et al., 2021, keeps the GPU's master, m and v in pinned host memory
// and updates them there; ZeRO-Infinity puts them on NVMe. CPU fp16 takes the GPU's column.
#pragma once
#include "zero/infinity.h"
#include "util/quantize.h"

#if ZERO_STAGE < 0 || ZERO_STAGE > 3
#error "ZERO_STAGE must be 0, 1, 2 or 3"
#endif
#ifndef ZERO_POISON
#define ZERO_POISON 0   // debug build: stage 3 fills released gather space with NaN
#endif

// kinds of memory, as the reports count them
enum { MEM_PARAMS = 0, MEM_GRADS, MEM_OPTIM, MEM_GATHER, MEM_GRAD_BUCKETS, MEM_ACTIVATIONS, MEM_SCRATCH, MEM_KV_CACHE,
       MEM_NVME_BUFFERS, MEM_DPU, N_MEM };
static const char *const MEM_NAMES[N_MEM] = {"params", "grads", "optimizer", "gathered_params", "grad_buckets", "activations",
                                            "scratch", "kv_cache", "nvme_buffers", "dpu_copies"};

typedef struct {
    int separate_master;        // an fp32 master beside floatX parameters: the GPU, the CPU's fp16 mode
    int offload;                // ZeRO-Offload, GPU: the optimizer partition and its update on the host
    int offload_param;          // GPU, stage 3: the parameter shard in pinned host memory
    ZeroInfinityPlan nvme;      // ZeRO-Infinity: which planes are on NVMe, and their tiles
    int lean_adamw;             // GPU, --lean-step 1: AdamW in one launch, with a weight-decay mask
    int whole;                  // stage 3 at one rank, the shard in working memory: units used in place
    int qw, hpz, qg;            // ZeRO++ at stage 3 with several ranks: qwZ, hpZ's partition size or 0, qgZ
    int dpu;                    // ZeRO-Offload's delayed update: its copies of the gradient and the parameters
    int twin_groups;            // Twin-Flow at stage 3: the partition's sub-groups, 0 when off
    size_t twin_host_off;       // where CPU-Adam's side of the shard starts; the device updates the rest
} ZeroPlacement;

// Twin-Flow, DeepSpeed's offload_optimizer.ratio: this rank's segments grouped, a group
// closed once it reaches `group` elements, and groups i >= (int)((1 - ratio) * n) given to
// CPU-Adam. Its side is the shard's end, from the returned offset.
static size_t zero_twin_host_off(const ZeroPlan *p, double ratio, long long group, int *n_groups) {
    int n = 0, k = 0;
    size_t in = 0, off = p->shard_elems;
    for (int s = 0; s < p->n_seg; s++) {
        in += p->seg[s].n;
        if (in >= (size_t)group || s == p->n_seg - 1) { n++; in = 0; }
    }
    int first = (int)((1 - ratio) * n);
    for (int s = 0; s < p->n_seg && off == p->shard_elems && first < n; s++) {
        if (in == 0 && k == first) off = zero_seg_shard_off(p, &p->seg[s]);
        in += p->seg[s].n;
        if (in >= (size_t)group) { k++; in = 0; }
    }
    *n_groups = n;
    return first <= 0 ? 0 : off;
}

// AdamW's state per element: master, m and v; m and v where the parameters are the master
static size_t zero_optim_elem_bytes(int separate_master) { return separate_master ? 12 : 8; }

// Twin-Flow's device side in elements, [0, d) of the shard: with the GPU's offload only;
// the CPU trainer updates both sides with CPU-Adam, in the host buffers
static size_t zero_twin_dev(const ZeroPlacement *pl) { return pl->offload ? pl->twin_host_off : 0; }

// x: the bytes of a floatX
static ZeroPlacement zero_placement(const ZeroPlan *p, const TrainConfig *cfg, int gpu, size_t x) {
    // the GPU's NVMe optimizer offload is an offload: CPU-Adam streams the state
    ZeroPlacement pl = {gpu || cfg->fp16, gpu && (cfg->offload || cfg->nvme_optim_dir[0]), gpu && cfg->offload_param && p->stage == 3};
    pl.nvme = zero_infinity_plan(cfg, p->stage, pl.separate_master, x, p->shard_elems, p->max_shard);
    // the lean AdamW needs the state and parameters in memory
    pl.lean_adamw = gpu && cfg->lean_step && !pl.offload && !pl.nvme.on[ZS_PARAM];
    // stage 3 at one rank: a shard in working memory is the model, used in place
    pl.whole = p->stage == 3 && p->P == 1 && !pl.offload_param && !pl.nvme.on[ZS_PARAM];
    int zpp = p->stage == 3 && p->P > 1;   // at one rank stage 3 has no collective
    pl.qw = zpp && cfg->zpp_quantized_weights;
    pl.hpz = zpp && cfg->zpp_hpz_size > 1 ? cfg->zpp_hpz_size : 0;
    pl.qg = zpp && cfg->zpp_quantized_gradients;
    pl.dpu = cfg->offload_dpu;
    if (p->stage == 3 && cfg->offload_ratio < 1) pl.twin_host_off = zero_twin_host_off(p, cfg->offload_ratio, cfg->sub_group_size, &pl.twin_groups);
    return pl;
}

// qgZ as DeepSpeed: plain on one node, and for units of 1-D tensors only
static int zero_qg_applies(const ZeroPlacement *pl, const ZeroPlan *p, int n_nodes, int u) {
    return pl->qg && n_nodes > 1 && p->u[u].has_matrix;
}

// hpZ's secondary partition: 1/hpz of every gathered unit
static size_t zero_hpz_elems(const ZeroPlan *p, int hpz) {
    size_t n = 0;
    for (int i = 0; i < p->n_units && hpz; i++) if (!p->u[i].persistent) n += p->u[i].padded / hpz;
    return n;
}

// ZeRO++'s staging, one allocation: the quantized message sent, the messages received,
// and qgZ's fp32 sums, one shard per node plus the result.
typedef struct { size_t send, recv, work; } ZeroZppStaging;
static ZeroZppStaging zero_zpp_staging(const ZeroPlan *p, const ZeroPlacement *pl) {
    size_t s = p->max_shard, P = (size_t)p->P, q8 = round_up(zq_bytes(s, 8), 16), q4 = round_up(zq_bytes(s, 4), 16);
    ZeroZppStaging z = {0, 0, 0};
    if (pl->qw) { z.send = q8; z.recv = P * q8; }
    if (pl->qw && pl->hpz) {   // hpZ's int8 gather
        size_t h = round_up(zq_bytes(p->max_padded / pl->hpz, 8), 16);
        z.send = h > z.send ? h : z.send; z.recv = pl->hpz * h > z.recv ? pl->hpz * h : z.recv;
    }
    if (pl->qg) { z.send = P * q4 > z.send ? P * q4 : z.send; z.recv = P * q4 > z.recv ? P * q4 : z.recv; z.work = (P + 1) * s * 4; }
    return z;
}

// The buffer table. Staging: offload's pinned copies of the reduced gradient and of CPU-Adam's output.
enum { ZBUF_PARAMS, ZBUF_MASTER, ZBUF_OPT_M, ZBUF_OPT_V, ZBUF_RESIDENT, ZBUF_ARENA, ZBUF_GRADS, ZBUF_GRAD_SHARD,
       ZBUF_GRAD_SLOTS, ZBUF_RS_SCRATCH, ZBUF_NVME_BUFFERS, ZBUF_DECAY_MASK, ZBUF_HPZ, ZBUF_ZPP_STAGING,
       ZBUF_DPU_GRAD, ZBUF_DPU_PARAMS, ZBUF_TWIN_STATE, ZBUF_STAGING_GRAD, ZBUF_STAGING_PARAMS, N_ZBUF };
typedef struct { size_t bytes; int kind, where; } ZeroBuffer;

static void zero_buffers(ZeroBuffer b[N_ZBUF], const ZeroPlan *p, size_t x, const ZeroPlacement *pl) {
    int st = p->stage, opt = pl->offload ? ZMEM_HOST : ZMEM_WORK, sm = pl->separate_master, offload = pl->offload;
    int gathers = st == 3 && !pl->whole;
    const int *nvme = pl->nvme.on;
    size_t shard = p->shard_elems, grad_x = st <= 1 ? x : 4, dev = zero_twin_dev(pl);
    memset(b, 0, sizeof(ZeroBuffer) * N_ZBUF);
    b[ZBUF_PARAMS] = (ZeroBuffer){(st <= 2 ? p->full_elems : shard) * x, MEM_PARAMS,
                                  nvme[ZS_PARAM] ? ZMEM_NVME : st == 3 && pl->offload_param ? ZMEM_HOST : ZMEM_WORK};
    // Twin-Flow: the offloaded master, m and v from the device side's end
    b[ZBUF_MASTER] = (ZeroBuffer){sm ? (shard - dev) * 4 : 0, MEM_OPTIM, nvme[ZS_MASTER] ? ZMEM_NVME : opt};
    b[ZBUF_OPT_M] = b[ZBUF_OPT_V] = (ZeroBuffer){(shard - dev) * 4, MEM_OPTIM, nvme[ZS_M] ? ZMEM_NVME : opt};
    b[ZBUF_RESIDENT] = (ZeroBuffer){gathers ? p->resident_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZBUF_ARENA] = (ZeroBuffer){gathers ? p->arena_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZBUF_GRADS] = (ZeroBuffer){st <= 1 ? p->full_elems * x : 0, MEM_GRADS, ZMEM_WORK};
    b[ZBUF_GRAD_SHARD] = (ZeroBuffer){st >= 2 ? shard * 4 : 0, MEM_GRADS, ZMEM_WORK};
    b[ZBUF_GRAD_SLOTS] = (ZeroBuffer){st >= 2 ? p->slot_elems * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZBUF_RS_SCRATCH] = (ZeroBuffer){st >= 2 ? p->max_shard * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZBUF_NVME_BUFFERS] = (ZeroBuffer){zero_infinity_buffer_bytes(&pl->nvme), MEM_NVME_BUFFERS, opt};
    b[ZBUF_DECAY_MASK] = (ZeroBuffer){pl->lean_adamw ? round_up(shard, 32) / 8 : 0, MEM_SCRATCH, ZMEM_WORK};
    ZeroZppStaging zs = zero_zpp_staging(p, pl);
    b[ZBUF_HPZ] = (ZeroBuffer){zero_hpz_elems(p, pl->hpz) * x, MEM_GATHER, ZMEM_WORK};
    b[ZBUF_ZPP_STAGING] = (ZeroBuffer){zs.send + zs.recv + zs.work, MEM_SCRATCH, ZMEM_WORK};
    // DPU's copies of the gradient and parameters; they replace offload's parameter staging
    b[ZBUF_DPU_GRAD] = (ZeroBuffer){pl->dpu ? shard * grad_x : 0, MEM_DPU, opt};
    b[ZBUF_DPU_PARAMS] = (ZeroBuffer){pl->dpu ? shard * x : 0, MEM_DPU, opt};
    // and the device side's master, m and v, one plane after another
    b[ZBUF_TWIN_STATE] = (ZeroBuffer){dev * zero_optim_elem_bytes(sm), MEM_OPTIM, ZMEM_WORK};
    // CPU-Adam's side of the shard; on NVMe it writes the parameter shard's tiles instead
    b[ZBUF_STAGING_GRAD] = (ZeroBuffer){sm && offload ? (shard - dev) * grad_x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
    b[ZBUF_STAGING_PARAMS] = (ZeroBuffer){sm && offload && !nvme[ZS_PARAM] && !pl->dpu ? (shard - dev) * x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
}

// Twin-Flow's split is by whole sub-groups: with fewer than 1 / (1 - ratio) of them, DeepSpeed's
// rule leaves every one on CPU-Adam's side, as with the default 1e9 elements on a small shard
static void zero_twin_check(const ZeroPlacement *pl, const ZeroPlan *p, const Comm *c, const TrainConfig *cfg) {
    char from[640];
    if (c->rank == 0 && pl->twin_groups && pl->twin_host_off == 0 && cfg->offload_ratio > 0)
        printf("note: %s: %g splits nothing here: rank 0's shard of %zu elements is %d sub-group%s of %lld elements, all on "
               "CPU-Adam's side by DeepSpeed's rule (groups from int((1 - ratio) * n)); a smaller --sub-group-size "
               "(sub_group_size) splits it\n", from_text(cfg, FROM_RATIO, "--offload-ratio", from, sizeof(from)), cfg->offload_ratio,
               p->shard_elems, pl->twin_groups, pl->twin_groups == 1 ? "" : "s", cfg->sub_group_size);
}

// qgZ's hierarchy needs nodes of equal, consecutive ranks; hpZ's groups divide the world
static void zero_zpp_check(const ZeroPlacement *pl, const ZeroPlan *p, const Comm *c, const TrainConfig *cfg) {
    char from[640];
    if (pl->qg && !c->node_size && c->n_nodes > 1)
        fatal("ZeRO++ qgZ: the nodes here are not blocks of consecutive ranks of one size (comm/launch.h prints them); "
              "launch with the same number of ranks on every node, placed by node");
    if (pl->hpz && c->world % pl->hpz)
        fatal("zero_hpz_partition_size %d (--zero-hpz-partition-size): the secondary partition's group size must divide the "
              "world of %d ranks", pl->hpz, c->world);
    if (c->world == 1 && p->stage == 3 && (cfg->zpp_quantized_weights || cfg->zpp_hpz_size > 1 || cfg->zpp_quantized_gradients))
        printf("note: %s: ZeRO++ (qwZ, hpZ, qgZ) has no effect at one rank: stage 3 there has no collective to change\n",
               from_text(cfg, FROM_ZEROPP, "ZeRO++", from, sizeof(from)));
    if (c->rank == 0 && !cfg->quiet && (pl->qw || pl->hpz || pl->qg))
        printf("ZeRO++ over %d node%s of %d rank%s:%s%s%s\n", c->n_nodes, c->n_nodes == 1 ? "" : "s", c->node_size,
               c->node_size == 1 ? "" : "s", pl->qw ? " qwZ (int8 parameter gathers, blocks of " ZQ_BLOCK_TEXT ")" : "",
               pl->hpz ? " hpZ (a unit's later gathers in a step from a secondary partition)" : "", pl->qg ? " qgZ (int4 hierarchical all-to-all gradients)" : "");
    if (c->rank == 0 && pl->hpz == c->world)
        printf("note: %s: %d is the world: the secondary partition would be each rank's primary slice again and its "
               "gathers span every rank, so hpZ has no effect but its memory (a divisor below the world, the ranks per node)\n",
               from_text(cfg, FROM_ZEROPP, "--zero-hpz-partition-size", from, sizeof(from)), pl->hpz);
    if (c->rank == 0 && pl->qg && c->n_nodes == 1)
        printf("note: ZeRO++ qgZ: one node, so the gradients are reduce-scattered plainly, as DeepSpeed does\n");
    // with every unit persistent, qwZ and hpZ have nothing to act on
    if (c->rank == 0 && (pl->qw || pl->hpz) && p->n_fetch_fwd == 0)
        printf("note: ZeRO++ %s: every unit here has at most %lld elements, so all stay whole (stage3_param_persistence_threshold, "
               "--persistence-threshold) and no parameter is gathered: %s nothing; a lower threshold brings the gathers back\n",
               pl->qw && pl->hpz ? "qwZ and hpZ" : pl->qw ? "qwZ" : "hpZ", cfg->persistence_threshold,
               pl->qw && pl->hpz ? "they quantize and keep" : pl->qw ? "it quantizes" : "it keeps");
    if (TRAINER_IS_GPU && c->rank == 0 && (pl->qw || pl->hpz || pl->qg))
        printf("note: ZeRO++ in train_gpt has not run on a GPU yet (its kernels have dev/cuda/quantize.cu); its collectives are "
               "staged through host memory and MPI (comm/nodes.h)\n");
}
