// zero/infinity.h: ZeRO-Infinity (Rajbhandari et al., 2021): the partition's state
// planes in memory or in this rank's NVMe files, on top of zero/nvme_store.h.
//
// The planes, each shard_elems long in shard order: ZS_MASTER (a separate fp32 master),
// ZS_M and ZS_V (AdamW's moments), ZS_PARAM (stage 3's parameter shard, the master
// itself without a separate one). --offload-nvme moves master, m and v; stage 3's
// --offload-param-nvme moves the parameter shard. With planes on NVMe the optimizer
// step streams them in tiles (zero_infinity_adamw), and stage 3 reads each unit's slice
// one unit ahead of its gather, along the pass's gather order.
#pragma once
#include "zero/backend.h"
#include "zero/nvme_store.h"

enum { ZS_MASTER, ZS_M, ZS_V, ZS_PARAM, N_ZSTATE };
static const char *const ZS_NAMES[N_ZSTATE] = {"fp32 master", "m", "v", "parameter shard"};

typedef struct {
    size_t elems;                // every plane's length: the shard's elements
    void *mem[N_ZSTATE];         // a plane in memory, NULL where absent or on NVMe
    int plane[N_ZSTATE];         // its plane in the store, or -1
    size_t elem[N_ZSTATE];       // bytes per element
    int master_is_param;         // no separate master: the parameters are the master
    int open;                    // some plane is on NVMe
    NvmeStore store;
    NvmeStream step;             // the optimizer step's pass over the planes on NVMe
    int in_step[N_ZSTATE];       // a plane's index in the step's tiles, or -1
    // stage 3: unit slices of the parameter shard, read one ahead along the gather order
    char *pbuf[2];
    NvmeJob pjob[2];
    size_t poff[2], pn[2];
    int pstate[2];               // 0: free, 1: being read, 2: read, its data may be in use
    void *pdata[2];
    int pnext;                   // the buffer the next read takes
    const ZeroPlan *plan;
    const int *order;            // the pass's gather order
    int n_order, pos;            // pos: the unit read ahead last
    NvmeStats step_io, last;     // the optimizer step's I/O and time since zero_infinity_take_stats
    double step_s;
    int steps;
} ZeroInfinity;

// What goes to NVMe, from the flags: zero/placement.h's buffer table uses it too.
struct ZeroInfinityPlan {
    int on[N_ZSTATE];            // plane on NVMe
    size_t elem[N_ZSTATE];
    size_t elems, max_slice;     // the shard; the largest unit slice, stage 3's reads
    size_t tile;                 // the step's tile, in elements
    int slots;
};

static ZeroInfinityPlan zero_infinity_plan(const TrainConfig *cfg, int stage, int separate_master, size_t x, size_t elems, size_t max_slice) {
    ZeroInfinityPlan q;
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

static int zero_infinity_any(const ZeroInfinityPlan *q) { return q->on[ZS_M] || q->on[ZS_PARAM]; }

// The memory the NVMe path uses, in one block: the step's tiles for each plane on NVMe,
// stage 3's two unit buffers, nvme_rw's staging, and alignment slack.
static size_t zero_infinity_buffer_bytes(const ZeroInfinityPlan *q) {
    if (!zero_infinity_any(q)) return 0;
    size_t per_tile = 0;
    for (int k = 0; k < N_ZSTATE; k++) if (q->on[k]) per_tile += nvme_round(q->tile * q->elem[k]);
    size_t unit = q->on[ZS_PARAM] ? 2 * nvme_span_bytes(q->elem[ZS_PARAM], q->max_slice) : 0;
    return per_tile * (size_t)q->slots + unit + NVME_BOUNCE_BYTES + NVME_ALIGN;
}

static AioSettings zero_infinity_aio(const TrainConfig *cfg) {
    return (AioSettings){cfg->aio_block_size, cfg->aio_queue_depth, cfg->aio_thread_count, cfg->aio_single_submit,
                         cfg->aio_overlap_events};
}

// Opens the store for the planes q puts on NVMe; mem holds the others. Collective: a
// failure on any rank stops every rank with its line.
static void zero_infinity_open(ZeroInfinity *st, const ZeroInfinityPlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
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
    if (!zero_infinity_any(q)) return;
    if (q->on[ZS_PARAM] && cfg->nvme_param_buffer_size > 0 && (size_t)cfg->nvme_param_buffer_size < q->max_slice)
        fatal("%s: zero_optimization.offload_param.buffer_size: %lld elements cannot hold this run's largest unit slice per rank "
              "(%zu elements): raise it, or leave it out", cfg->config_path, cfg->nvme_param_buffer_size, q->max_slice);
    st->open = 1;
    AioSettings aio = zero_infinity_aio(cfg);
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

// Stage 3: the reads still in flight are waited for and forgotten, before the shard is written.
static void zero_infinity_param_drop(ZeroInfinity *st) {
    for (int i = 0; i < 2; i++) {
        if (st->pstate[i] == 1) nvme_wait(&st->store, &st->pjob[i]);
        st->pstate[i] = 0;
    }
}

static void zero_infinity_close(ZeroInfinity *st) {
    if (!st->open) return;
    zero_infinity_param_drop(st);
    nvme_stream_free(&st->step);
    nvme_store_close(&st->store);
    st->open = 0;
}

// n elements of plane k, on NVMe, from shard offset off to or from host memory
static void zero_infinity_rw(ZeroInfinity *st, int k, size_t off, size_t n, void *host, int write) {
    if (write && k == ZS_PARAM) zero_infinity_param_drop(st);
    nvme_rw(&st->store, st->plane[k], off, n, host, write);
}

// ----------------------------------------------------------------------------
// the optimizer step, streamed: the segments in shard order, tile by tile

// One piece of segment s, its elements [at, at + n), with its state where it is now:
// in memory or in the step's tiles. param_in_tile: the parameters are a tile of the
// NVMe parameter shard, not the working parameters.
typedef void (*ZeroAdamPiece)(void *ctx, const ZeroAdamSeg *s, size_t at, size_t n, float *master, float *m, float *v,
                              floatX *param, int param_in_tile);

typedef struct { ZeroInfinity *st; const ZeroAdamSeg *seg; int n_seg, next; ZeroAdamPiece piece; void *ctx; } ZeroAdamWalk;

// plane k at shard offset so, in the tiles that start at shard offset tile_off
static void *zero_tile_at(const ZeroInfinity *st, int k, size_t so, void *const *tile, size_t tile_off) {
    return (char *)tile[st->in_step[k]] + (so - tile_off) * st->elem[k];
}

static void zero_adam_tile(size_t off, size_t n, void *const *tile, void *ctx) {
    ZeroAdamWalk *w = (ZeroAdamWalk *)ctx;
    const ZeroInfinity *st = w->st;
    while (w->next < w->n_seg && w->seg[w->next].shard_off + w->seg[w->next].n <= off) w->next++;
    for (int i = w->next; i < w->n_seg && w->seg[i].shard_off < off + n; i++) {
        const ZeroAdamSeg *s = &w->seg[i];
        size_t a = s->shard_off > off ? s->shard_off : off, b = s->shard_off + s->n < off + n ? s->shard_off + s->n : off + n;
        size_t d = a - s->shard_off;
        floatX *param = s->param ? s->param + d : (floatX *)zero_tile_at(st, ZS_PARAM, a, tile, off);
        float *master = s->master ? s->master + d : st->master_is_param ? (float *)param : (float *)zero_tile_at(st, ZS_MASTER, a, tile, off);
        float *m = s->m ? s->m + d : (float *)zero_tile_at(st, ZS_M, a, tile, off);
        float *v = s->v ? s->v + d : (float *)zero_tile_at(st, ZS_V, a, tile, off);
        w->piece(w->ctx, s, d, b - a, master, m, v, param, !s->param);
    }
}

// AdamW over the partition with planes on NVMe: tile k+1 is read while tile k is
// updated and tile k-1 written back. A NULL pointer in a segment: that state is in the tiles.
static void zero_infinity_adamw(ZeroInfinity *st, const ZeroAdamSeg *seg, int n_seg, ZeroAdamPiece piece, void *ctx) {
    ZeroAdamWalk w = {st, seg, n_seg, 0, piece, ctx};
    zero_infinity_param_drop(st);   // reads of the parameters the step replaces
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

// the buffer the next read takes: the GPU first waits until its last copy out is done
static int zero_infinity_param_next(const ZeroInfinity *st) { return st->pnext; }

static void zero_infinity_read_ahead(ZeroInfinity *st, size_t off, size_t n) {
    int k = st->pnext;
    if (st->pstate[k] == 1) nvme_wait(&st->store, &st->pjob[k]);   // a read nobody took
    st->pdata[k] = nvme_read_start(&st->store, &st->pjob[k], st->plane[ZS_PARAM], off, n, st->pbuf[k]);
    st->poff[k] = off; st->pn[k] = n; st->pstate[k] = 1;
    st->pnext = k ^ 1;
}

// Elements [off, off + n) of the parameter shard in host memory: the read started for
// them, or one now. *buffer: the buffer that holds them until a later read takes it.
static const void *zero_infinity_param_slice(ZeroInfinity *st, size_t off, size_t n, int *buffer) {
    for (int k = 0; k < 2; k++)
        if (st->pstate[k] == 1 && st->poff[k] == off && st->pn[k] == n) {
            nvme_wait(&st->store, &st->pjob[k]);
            st->pstate[k] = 2;
            *buffer = k;
            return st->pdata[k];
        }
    zero_infinity_read_ahead(st, off, n);
    return zero_infinity_param_slice(st, off, n, buffer);
}

// A pass starts: its gather order, and its first unit to read ahead.
static const ZeroUnit *zero_infinity_pass_begin(ZeroInfinity *st, const ZeroPlan *p, const int *order, int n) {
    st->plan = p; st->order = order; st->n_order = n; st->pos = 0;
    return n > 0 ? &p->u[order[0]] : NULL;
}
// The slice at shard offset off was taken: the next unit of the order to read ahead, if
// that slice was the one read ahead last. Persistent units are not in the order.
static const ZeroUnit *zero_infinity_next(ZeroInfinity *st, size_t off) {
    if (!st->order || st->pos >= st->n_order || st->plan->u[st->order[st->pos]].shard_off != off) return NULL;
    return ++st->pos < st->n_order ? &st->plan->u[st->order[st->pos]] : NULL;
}

// The I/O since the last call: the optimizer step's, with its busy, wait and wall time,
// and everything else's: stage 3's reads, checkpoints. Returns 0 without NVMe.
struct ZeroNvmeStats { NvmeStats step, other; double step_s; int steps; };
static int zero_infinity_take_stats(ZeroInfinity *st, ZeroNvmeStats *out) {
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
