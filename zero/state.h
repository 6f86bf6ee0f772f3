// zero/state.h: where the state of this rank's partition lives, for both backends
// (zero/host.h, zero/device.cuh): ZeRO-Infinity's NVMe offload (Rajbhandari et al.,
// 2021) on top of zero/nvme_store.h.
//
// The partition's state is a few planes of shard_elems elements each, in shard order:
//   ZS_MASTER  the separate fp32 master (the GPU trainer; the CPU trainer's fp16 mode)
//   ZS_M, ZS_V AdamW's moments
//   ZS_PARAM   stage 3: this rank's parameter shard (floatX); without a separate master
//              (the CPU trainer in fp32) it IS the master
// Each plane is in memory (zero/placement.h's buffers, which the backend reads and writes with its
// own copies) or in this rank's file under a directory (nvme_optim_dir: master, m, v;
// nvme_param_dir: the parameter shard). The CPU trainer's fp32 parameters are its master
// and stay in memory in stages 0-2 (the forward reads them whole there): only m and v
// move. In stage 3 --offload-param-nvme moves the shard, and so the master, too.
//
// The optimizer step (zero_state_adamw) walks the partition in shard order: with planes
// on NVMe it streams them in tiles (nvme_stream_run: tile k+1 read while CPU-Adam updates
// tile k and tile k-1 is written back), and hands the backend each piece of a segment
// that lies in one tile, with pointers into the tiles or into memory.
// Stage 3 reads a unit's slice of the parameter shard just before its gather, one unit
// ahead (zero_nvme_param_read_ahead / zero_nvme_param_slice; two buffers).
#pragma once
#include "zero/backend.h"
#include "zero/nvme_store.h"

enum { ZS_MASTER, ZS_M, ZS_V, ZS_PARAM, N_ZSTATE };
static const char *const ZS_NAMES[N_ZSTATE] = {"fp32 master", "m", "v", "parameter shard"};

typedef struct {
    size_t elems;                // every plane's length: the shard's elements
    void *mem[N_ZSTATE];         // a plane in memory (NULL: absent, or on NVMe)
    int plane[N_ZSTATE];         // its plane in the store, or -1
    size_t elem[N_ZSTATE];       // bytes per element
    int master_is_param;         // no separate master: the parameters are the master
    int open;                    // some plane is on NVMe
    NvmeStore store;
    NvmeStream step;             // the optimizer step's pass (the planes on NVMe)
    int in_step[N_ZSTATE];       // a plane's index in the step's tiles, or -1
    // stage 3: unit slices of the parameter shard, read one ahead of their gather
    char *pbuf[2];
    NvmeJob pjob[2];
    size_t poff[2], pn[2];
    int pstate[2];               // 0: free, 1: being read, 2: read (its data may still be in use)
    void *pdata[2];
    int pnext;                   // the buffer the next read takes
    // the optimizer step's share of the I/O, and its time, since zero_nvme_take_stats
    NvmeStats step_io, last;
    double step_s;
    int steps;
} ZeroNvme;

// What the NVMe path asks for, from the flags and config (zero/placement.h's buffer table and zb_state_init).
typedef struct {
    int on[N_ZSTATE];            // plane on NVMe
    size_t elem[N_ZSTATE];
    size_t elems, max_slice;     // the shard; the largest unit slice (stage 3's reads)
    size_t tile;                 // the step's tile (elements)
    int slots;
} ZeroNvmePlan;

static ZeroNvmePlan zero_nvme_plan(const TrainConfig *cfg, int stage, int separate_master, size_t x, size_t elems, size_t max_slice) {
    ZeroNvmePlan q;
    memset(&q, 0, sizeof(q));
    int optim = cfg->nvme_optim_dir[0] != 0, param = stage == 3 && cfg->nvme_param_dir[0] != 0;
    q.on[ZS_MASTER] = optim && separate_master;
    q.on[ZS_M] = q.on[ZS_V] = optim;
    q.on[ZS_PARAM] = param;
    q.elem[ZS_MASTER] = q.elem[ZS_M] = q.elem[ZS_V] = 4;
    q.elem[ZS_PARAM] = x;
    q.elems = elems; q.max_slice = max_slice;
    q.tile = nvme_stream_tile((size_t)cfg->nvme_tile, elems);
    q.slots = cfg->nvme_buffers;
    return q;
}

static int zero_nvme_any(const ZeroNvmePlan *q) { return q->on[ZS_M] || q->on[ZS_PARAM]; }

// The memory the NVMe path uses, in one block: the step's tiles (slots x the planes on
// NVMe), stage 3's two unit buffers, nvme_rw's staging, and alignment slack.
static size_t zero_nvme_buffer_bytes(const ZeroNvmePlan *q) {
    if (!zero_nvme_any(q)) return 0;
    size_t per_tile = 0;
    for (int k = 0; k < N_ZSTATE; k++) if (q->on[k]) per_tile += nvme_round(q->tile * q->elem[k]);
    size_t unit = q->on[ZS_PARAM] ? 2 * nvme_span_bytes(q->elem[ZS_PARAM], q->max_slice) : 0;
    return per_tile * (size_t)q->slots + unit + NVME_BOUNCE_BYTES + NVME_ALIGN;
}

static AioSettings zero_nvme_aio(const TrainConfig *cfg) {
    return (AioSettings){cfg->aio_block_size, cfg->aio_queue_depth, cfg->aio_thread_count, cfg->aio_single_submit,
                         cfg->aio_overlap_events};
}

// Opens the store for the planes q puts on NVMe (mem: the others' memory, NULL where
// absent); buffers: zero_nvme_buffer_bytes of memory. Collective: a failure on any rank
// stops every rank with the failing rank's line. Rank 0 says where the files are (say).
static void zero_nvme_open(ZeroNvme *st, const ZeroNvmePlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
                           void *buffers, Comm *comm, int say) {
    memset(st, 0, sizeof(*st));
    st->elems = q->elems;
    st->master_is_param = !separate_master;
    for (int k = 0; k < N_ZSTATE; k++) {
        st->mem[k] = q->on[k] ? NULL : mem[k];
        st->plane[k] = -1;
        st->in_step[k] = -1;
        st->elem[k] = q->elem[k];
    }
    if (!zero_nvme_any(q)) return;
    if (q->on[ZS_PARAM] && cfg->nvme_param_buffer_size > 0 && (size_t)cfg->nvme_param_buffer_size < q->max_slice)
        fatal("%s: zero_optimization.offload_param.buffer_size: %lld elements cannot hold this run's largest unit slice per rank "
              "(%zu elements): raise it, or leave it out", cfg->config_path, cfg->nvme_param_buffer_size, q->max_slice);
    st->open = 1;
    AioSettings aio = zero_nvme_aio(cfg);
    nvme_store_init(&st->store, &aio);
    char name[128];
    int fo = -1, fp = -1;
    if (q->on[ZS_M]) {
        snprintf(name, sizeof(name), "zeroc-rank%05d-pid%d-optimizer.swp", comm->rank, (int)getpid());
        fo = nvme_file_add(&st->store, cfg->nvme_optim_dir, name);
    }
    if (q->on[ZS_PARAM]) {
        snprintf(name, sizeof(name), "zeroc-rank%05d-pid%d-params.swp", comm->rank, (int)getpid());
        fp = nvme_file_add(&st->store, cfg->nvme_param_dir, name);
    }
    for (int k = 0; k < N_ZSTATE; k++)
        if (q->on[k]) st->plane[k] = nvme_plane_add(&st->store, k == ZS_PARAM ? fp : fo, q->elem[k], q->elems);
    // the memory block: tiles, unit buffers, staging
    char *at = (char *)round_up((uintptr_t)buffers, NVME_ALIGN);
    int plane[N_ZSTATE], mode[N_ZSTATE], n = 0;
    for (int k = 0; k < N_ZSTATE; k++) {
        if (!q->on[k]) continue;
        st->in_step[k] = n;
        plane[n] = st->plane[k];
        // a separate master makes the parameter shard an output of the step only
        mode[n++] = k == ZS_PARAM && separate_master ? NVME_WRITE : NVME_READ | NVME_WRITE;
    }
    nvme_stream_init(&st->step, plane, mode, n, q->tile, q->slots, cfg->nvme_pipeline_read, cfg->nvme_pipeline_write, at);
    at += nvme_stream_buffer_bytes(&st->store, plane, n, q->tile, q->slots);
    if (q->on[ZS_PARAM])
        for (int i = 0; i < 2; i++) { st->pbuf[i] = at; at += nvme_span_bytes(q->elem[ZS_PARAM], q->max_slice); }
    char err[1400] = "";
    int ok = nvme_store_open(&st->store, cfg->nvme_fast_init, at, err, sizeof(err));
    if (!comm_agree(comm, ok, err, sizeof(err))) fatal("NVMe offload: %s", err);
    if (!say) return;
    printf("ZeRO-Infinity (NVMe offload), per rank:");
    for (int f = 0; f < st->store.n_files; f++) {
        char what[96] = "";
        double bytes = 0;
        for (int k = 0; k < N_ZSTATE; k++)
            if (st->plane[k] >= 0 && st->store.plane[st->plane[k]].file == f) {
                snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s", what[0] ? ", " : "", ZS_NAMES[k]);
                bytes += (double)q->elems * q->elem[k];
            }
        printf("%s %s (%.1f MB) in %s", f ? ";" : "", what, bytes / 1e6, st->store.file[f].path);
    }
    printf("\n       (one file per rank, removed at exit)%s; the optimizer step streams tiles of %zu elements through %d buffers "
           "(read %s, write %s); %s\n", separate_master || q->on[ZS_PARAM] ? "" : "; the CPU trainer's fp32 parameters are its master and stay in memory",
           q->tile, q->slots, cfg->nvme_pipeline_read ? "ahead" : "in turn", cfg->nvme_pipeline_write ? "behind" : "in turn",
           st->store.engine);
}

// Stage 3: the reads of unit slices still in flight are waited for and forgotten (before
// the parameter shard is written).
static void zero_nvme_param_drop(ZeroNvme *st) {
    for (int i = 0; i < 2; i++) {
        if (st->pstate[i] == 1) nvme_wait(&st->store, &st->pjob[i]);
        st->pstate[i] = 0;
    }
}

static void zero_nvme_close(ZeroNvme *st) {
    if (!st->open) return;
    zero_nvme_param_drop(st);
    nvme_stream_free(&st->step);
    nvme_store_close(&st->store);
    st->open = 0;
}

// n elements of plane k from shard offset off, to or from host memory (the plane is on NVMe)
static void zero_nvme_rw(ZeroNvme *st, int k, size_t off, size_t n, void *host, int write) {
    if (write && k == ZS_PARAM) zero_nvme_param_drop(st);
    nvme_rw(&st->store, st->plane[k], off, n, host, write);
}

// ----------------------------------------------------------------------------
// the optimizer step: the partition's segments in shard order

// One piece of a segment, its elements [at, at + n), that lies in one tile, with the master,
// m, v and parameters where the piece is now. param_in_tile: the parameters are a tile of the
// NVMe parameter shard in host memory, not the working parameters.
typedef void (*ZeroAdamPiece)(void *ctx, const ZeroAdamSeg *s, size_t at, size_t n, float *master, float *m, float *v,
                              floatX *param, int param_in_tile);

typedef struct { ZeroNvme *st; const ZeroAdamSeg *seg; int n_seg, next; ZeroAdamPiece piece; void *ctx; } ZeroAdamWalk;

// plane k at shard offset so: in the tile that starts at tile_off, or in memory
static char *zero_state_at(const ZeroNvme *st, int k, size_t so, void *const *tile, size_t tile_off) {
    if (st->in_step[k] >= 0) return (char *)tile[st->in_step[k]] + (so - tile_off) * st->elem[k];
    return st->mem[k] ? (char *)st->mem[k] + so * st->elem[k] : NULL;
}

static void zero_adam_tile(size_t off, size_t n, void *const *tile, void *ctx) {
    ZeroAdamWalk *w = (ZeroAdamWalk *)ctx;
    const ZeroNvme *st = w->st;
    while (w->next < w->n_seg && w->seg[w->next].so + w->seg[w->next].n <= off) w->next++;
    for (int i = w->next; i < w->n_seg && w->seg[i].so < off + n; i++) {
        const ZeroAdamSeg *s = &w->seg[i];
        size_t a = s->so > off ? s->so : off, b = s->so + s->n < off + n ? s->so + s->n : off + n;
        floatX *param = s->param ? s->param + (a - s->so) : (floatX *)zero_state_at(st, ZS_PARAM, a, tile, off);
        float *master = st->master_is_param ? (float *)param : (float *)zero_state_at(st, ZS_MASTER, a, tile, off);
        w->piece(w->ctx, s, a - s->so, b - a, master, (float *)zero_state_at(st, ZS_M, a, tile, off),
                 (float *)zero_state_at(st, ZS_V, a, tile, off), param, !s->param);
    }
}

// AdamW over the partition, piece by piece. seg is in shard order; a segment whose param
// is NULL has its parameters in the NVMe shard. With everything in memory a piece is a segment.
static void zero_state_adamw(ZeroNvme *st, const ZeroAdamSeg *seg, int n_seg, ZeroAdamPiece piece, void *ctx) {
    ZeroAdamWalk w = {st, seg, n_seg, 0, piece, ctx};
    if (!st->open) { zero_adam_tile(0, st->elems, NULL, &w); return; }
    zero_nvme_param_drop(st);   // (reads of the parameters the step replaces)
    double t0 = wall_time();
    NvmeStats a = nvme_stats(&st->store);
    nvme_stream_run(&st->store, &st->step, st->elems, zero_adam_tile, &w);
    NvmeStats b = nvme_stats(&st->store);
    st->step_io.read_bytes += b.read_bytes - a.read_bytes;
    st->step_io.write_bytes += b.write_bytes - a.write_bytes;
    st->step_io.busy_s += b.busy_s - a.busy_s;
    st->step_io.wait_s += b.wait_s - a.wait_s;
    st->step_s += wall_time() - t0;
    st->steps++;
}

// ----------------------------------------------------------------------------
// stage 3: unit slices of the parameter shard, one ahead of their gather

// the buffer the next read takes (the GPU makes sure its last copy out of it is done)
static int zero_nvme_param_next(const ZeroNvme *st) { return st->pnext; }

static void zero_nvme_param_read_ahead(ZeroNvme *st, size_t off, size_t n) {
    int k = st->pnext;
    if (st->pstate[k] == 1) nvme_wait(&st->store, &st->pjob[k]);   // a read nobody took
    st->pdata[k] = nvme_read_start(&st->store, &st->pjob[k], st->plane[ZS_PARAM], off, n, st->pbuf[k]);
    st->poff[k] = off; st->pn[k] = n; st->pstate[k] = 1;
    st->pnext = k ^ 1;
}

// Elements [off, off + n) of the parameter shard in host memory: the read started for
// them, or one now. *buffer: which buffer holds them (valid until a later read takes it).
static const void *zero_nvme_param_slice(ZeroNvme *st, size_t off, size_t n, int *buffer) {
    for (int k = 0; k < 2; k++)
        if (st->pstate[k] == 1 && st->poff[k] == off && st->pn[k] == n) {
            nvme_wait(&st->store, &st->pjob[k]);
            st->pstate[k] = 2;
            *buffer = k;
            return st->pdata[k];
        }
    zero_nvme_param_read_ahead(st, off, n);
    return zero_nvme_param_slice(st, off, n, buffer);
}

// The I/O since the last call: the optimizer step's (bytes, busy and wait time, the
// pass's wall time) and everything else's (stage-3 reads, checkpoints). Returns 0 without NVMe.
typedef struct { NvmeStats step, other; double step_s; int steps; } ZeroNvmeStats;
static int zero_nvme_take_stats(ZeroNvme *st, ZeroNvmeStats *out) {
    if (!st->open) return 0;
    NvmeStats now = nvme_stats(&st->store), *last = &st->last;
    out->step = st->step_io;
    out->other.read_bytes = now.read_bytes - last->read_bytes - st->step_io.read_bytes;
    out->other.write_bytes = now.write_bytes - last->write_bytes - st->step_io.write_bytes;
    out->other.busy_s = now.busy_s - last->busy_s - st->step_io.busy_s;
    out->other.wait_s = now.wait_s - last->wait_s - st->step_io.wait_s;
    out->step_s = st->step_s;
    out->steps = st->steps;
    *last = now;
    memset(&st->step_io, 0, sizeof(st->step_io));
    st->step_s = 0;
    st->steps = 0;
    return 1;
}
