// zero/nvme_store.h: ZeRO-Infinity's NVMe store (Rajbhandari et al., 2021, "ZeRO-Infinity:
// Breaking the GPU Memory Wall"), as zero/infinity.h uses it; nothing here knows ZeRO.
//
// A store is a few files (one per directory it was given; zero/infinity.h makes one per
// rank) holding fixed-size arrays of fp32 or 16-bit elements, "planes". It is read and
// written with asynchronous I/O: io_uring through liburing, driven by I/O threads that
// each own a ring. DeepSpeed's "aio" block sets the engine (deepspeed/runtime/swap_tensor/
// aio_config.py; DeepSpeed's own engine is libaio with the same knobs):
//   block_size       every request moves at most this many bytes (a job is cut into blocks)
//   queue_depth      requests in flight per thread
//   thread_count     I/O threads, each with its own ring; a job's blocks are dealt out among
//                    them round robin (DeepSpeed: "intra-request parallelism")
//   single_submit    one io_uring_submit per request, instead of one per batch
//   overlap_events   a thread refills its queue as requests complete; false: it submits a
//                    wave of queue_depth requests and waits for all of them before the next
// Files are opened with O_DIRECT where the filesystem allows it (no page cache: the bytes
// really go to the device, and reading them back costs what the device costs); every
// offset, length and buffer is then a multiple of NVME_ALIGN. Where O_DIRECT is refused
// the store falls back to buffered I/O, and nvme_store_open says so. Where io_uring is
// unavailable (an old kernel, a seccomp filter) each I/O thread does blocking
// pread/pwrite instead, and queue_depth/single_submit/overlap_events have nothing to
// act on (said at start-up). Tests force either fallback: ZEROC_AIO=threads,buffered.
//
//   nvme_store_init / nvme_file_add / nvme_plane_add / nvme_store_open / nvme_store_close
//   nvme_rw                        any range of a plane to or from memory, complete on return
//   nvme_read_start / nvme_wait    one range read into an aligned buffer, in the background
//   nvme_stream_run                a pass over planes in tiles: tile k+1 is read while the
//                                  caller updates tile k and tile k-1 is written back
// Statistics (NvmeStats): bytes moved, the time some I/O was in flight ("busy"), and the
// time the caller spent waiting for it.
#pragma once
#include "util/common.h"
#include <liburing.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <sys/stat.h>

#define NVME_ALIGN 4096        // O_DIRECT: offsets, lengths and buffers (any logical block size up to 4 KiB)
#define NVME_MAX_FILES 2
#define NVME_MAX_PLANES 8
#define NVME_BOUNCE_BYTES ((size_t)1 << 20)   // nvme_rw's aligned staging

typedef struct {
    long long block_size;
    int queue_depth, thread_count, single_submit, overlap_events;
} AioSettings;

typedef struct {
    double read_bytes, write_bytes;
    double busy_s;   // time with at least one job in flight
    double wait_s;   // time the caller was blocked in nvme_wait
} NvmeStats;

// a job: one or more ranges, cut into blocks; complete when every block is
typedef struct {
    int remaining;               // blocks (+1 while being submitted), under the store's lock
    int err, err_file, write;    // the first failure: errno, which file
    long long err_off;
} NvmeJob;

typedef struct { NvmeJob *job; int file, write; char *buf; size_t len; off_t off; } NvmeReq;

struct NvmeStore;
typedef struct {
    struct NvmeStore *s;
    pthread_t th;
    pthread_cond_t cv;           // work for this thread
    struct io_uring ring;
    int have_ring;
    NvmeReq *q;                  // pending requests (a ring buffer)
    int q_head, q_len, q_cap;
} NvmeWorker;

typedef struct { char path[1024]; int fd; int direct; off_t size; } NvmeFile;
typedef struct { int file; off_t base; size_t elem, elems; } NvmePlane;

typedef struct NvmeStore {
    AioSettings aio;
    NvmeFile file[NVME_MAX_FILES];
    NvmePlane plane[NVME_MAX_PLANES];
    int n_files, n_planes;
    char engine[400];            // how the I/O is done, for the start-up line
    NvmeWorker *w;
    int n_workers, next_worker, stop;
    pthread_mutex_t mu;          // the queues, the jobs' counters, the statistics
    pthread_cond_t done;         // some job completed
    int active;                  // jobs in flight
    double busy_since;
    NvmeStats st;
    char *bounce;                // nvme_rw's staging (NVME_BOUNCE_BYTES, aligned)
} NvmeStore;

static size_t nvme_round(size_t n) { return round_up(n, (size_t)NVME_ALIGN); }

// ----------------------------------------------------------------------------
// the engine: I/O threads, each with a ring of queue_depth entries

// Under s->mu: a request finished (err 0) or failed.
static void nvme_finish_locked(NvmeStore *s, NvmeReq *r, int err) {
    NvmeJob *j = r->job;
    if (err && !j->err) { j->err = err; j->err_file = r->file; j->err_off = (long long)r->off; j->write = r->write; }
    if (!err) *(r->write ? &s->st.write_bytes : &s->st.read_bytes) += (double)r->len;
    if (--j->remaining == 0) {
        if (--s->active == 0) s->st.busy_s += wall_time() - s->busy_since;
        pthread_cond_broadcast(&s->done);
    }
}

// room for one more request in w's queue (under the store's lock), in order
static void nvme_queue_reserve(NvmeWorker *w) {
    if (w->q_len < w->q_cap) return;
    int cap = 2 * w->q_cap;
    NvmeReq *q = (NvmeReq *)xmalloc(sizeof(NvmeReq) * cap, "I/O queue");
    for (int i = 0; i < w->q_len; i++) q[i] = w->q[(w->q_head + i) % w->q_cap];
    free(w->q);
    w->q = q; w->q_head = 0; w->q_cap = cap;
}

// a request's result res (bytes, or -errno): done, failed, or (short transfer) requeued for the rest
static void nvme_complete(NvmeWorker *w, NvmeReq r, long res) {
    NvmeStore *s = w->s;
    pthread_mutex_lock(&s->mu);
    if (res == -EINTR || res == -EAGAIN || (res > 0 && (size_t)res < r.len)) {
        if (res > 0) { r.buf += res; r.off += res; r.len -= (size_t)res; }
        nvme_queue_reserve(w);
        w->q_head = (w->q_head + w->q_cap - 1) % w->q_cap;   // at the front: next
        w->q[w->q_head] = r;
        w->q_len++;
    } else {
        NvmeReq done = r;
        if (res >= 0) done.len = (size_t)res;
        nvme_finish_locked(s, &done, res < 0 ? (int)-res : res == 0 ? EIO : 0);
    }
    pthread_mutex_unlock(&s->mu);
}

static void *nvme_worker(void *arg) {
    NvmeWorker *w = (NvmeWorker *)arg;
    NvmeStore *s = w->s;
    int qd = s->aio.queue_depth, inflight = 0;
    NvmeReq *fly = (NvmeReq *)xcalloc(sizeof(NvmeReq) * qd, "I/O requests");
    int *free_slot = (int *)xmalloc(sizeof(int) * qd, "I/O requests"), n_free = qd;
    for (int i = 0; i < qd; i++) free_slot[i] = i;
    NvmeReq *batch = (NvmeReq *)xmalloc(sizeof(NvmeReq) * qd, "I/O requests");
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && w->q_len == 0 && inflight == 0) pthread_cond_wait(&w->cv, &s->mu);
        if (s->stop && w->q_len == 0 && inflight == 0) { pthread_mutex_unlock(&s->mu); break; }
        // overlap_events: top the queue up; otherwise one wave at a time
        int room = !w->have_ring ? 1 : s->aio.overlap_events ? qd - inflight : inflight ? 0 : qd;
        int take = room < w->q_len ? room : w->q_len;
        for (int i = 0; i < take; i++) {
            batch[i] = w->q[w->q_head];
            w->q_head = (w->q_head + 1) % w->q_cap;
            w->q_len--;
        }
        pthread_mutex_unlock(&s->mu);
        if (!w->have_ring) {   // the fallback: one blocking call at a time
            for (int i = 0; i < take; i++) {
                NvmeReq *r = &batch[i];
                int fd = s->file[r->file].fd;
                ssize_t got = r->write ? pwrite(fd, r->buf, r->len, r->off) : pread(fd, r->buf, r->len, r->off);
                nvme_complete(w, *r, got < 0 ? -errno : (long)got);
            }
            continue;
        }
        for (int i = 0; i < take; i++) {
            int slot = free_slot[--n_free];
            fly[slot] = batch[i];
            struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);   // never NULL: at most qd in flight
            int fd = s->file[batch[i].file].fd;
            if (batch[i].write) io_uring_prep_write(sqe, fd, batch[i].buf, (unsigned)batch[i].len, batch[i].off);
            else io_uring_prep_read(sqe, fd, batch[i].buf, (unsigned)batch[i].len, batch[i].off);
            io_uring_sqe_set_data(sqe, (void *)(uintptr_t)slot);
            if (s->aio.single_submit) io_uring_submit(&w->ring);
        }
        if (take && !s->aio.single_submit) io_uring_submit(&w->ring);
        inflight += take;
        if (!inflight) continue;
        struct io_uring_cqe *cqe;
        int e = io_uring_wait_cqe(&w->ring, &cqe);
        if (e == -EINTR) continue;
        if (e < 0) fatal("NVMe offload: io_uring_wait_cqe: %s", strerror(-e));
        do {   // every completion that is ready
            int slot = (int)(uintptr_t)io_uring_cqe_get_data(cqe);
            long res = cqe->res;
            io_uring_cqe_seen(&w->ring, cqe);
            free_slot[n_free++] = slot;
            inflight--;
            nvme_complete(w, fly[slot], res);
        } while (io_uring_peek_cqe(&w->ring, &cqe) == 0);
    }
    free(fly); free(free_slot); free(batch);
    return NULL;
}

static void nvme_job_begin(NvmeStore *s, NvmeJob *j) {
    memset(j, 0, sizeof(*j));
    j->remaining = 1;   // held until nvme_job_end: no completion can finish it while blocks are added
    pthread_mutex_lock(&s->mu);
    if (s->active++ == 0) s->busy_since = wall_time();
    pthread_mutex_unlock(&s->mu);
}

// one range of a file into the job, cut into block_size requests dealt out to the threads
static void nvme_job_add(NvmeStore *s, NvmeJob *j, int file, int write, void *buf, size_t len, off_t off) {
    size_t bs = (size_t)s->aio.block_size;
    pthread_mutex_lock(&s->mu);
    for (size_t at = 0; at < len; at += bs) {
        NvmeWorker *w = &s->w[s->next_worker];
        s->next_worker = (s->next_worker + 1) % s->n_workers;
        nvme_queue_reserve(w);
        w->q[(w->q_head + w->q_len++) % w->q_cap] = (NvmeReq){j, file, write, (char *)buf + at, len - at < bs ? len - at : bs, off + (off_t)at};
        j->remaining++;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

static void nvme_job_end(NvmeStore *s, NvmeJob *j) {
    pthread_mutex_lock(&s->mu);
    if (--j->remaining == 0) {
        if (--s->active == 0) s->st.busy_s += wall_time() - s->busy_since;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
}

// Waits for the job; a failed job ends the run with one line naming the file.
static void nvme_wait(NvmeStore *s, NvmeJob *j) {
    double t0 = wall_time();
    pthread_mutex_lock(&s->mu);
    while (j->remaining > 0) pthread_cond_wait(&s->done, &s->mu);
    s->st.wait_s += wall_time() - t0;
    pthread_mutex_unlock(&s->mu);
    if (j->err)
        fatal("NVMe offload: %s: %s at byte %lld failed: %s%s", s->file[j->err_file].path, j->write ? "write" : "read",
              j->err_off, strerror(j->err), j->err == ENOSPC ? " (the device is full: free space or use another nvme_path)" : "");
}

// ----------------------------------------------------------------------------
// files and planes

static void nvme_store_init(NvmeStore *s, const AioSettings *aio) {
    memset(s, 0, sizeof(*s));
    s->aio = *aio;
    for (int i = 0; i < NVME_MAX_FILES; i++) s->file[i].fd = -1;
}

// a file dir/name (created by nvme_store_open); returns its index
static int nvme_file_add(NvmeStore *s, const char *dir, const char *name) {
    if (s->n_files == NVME_MAX_FILES) fatal("NVMe offload: more than %d files", NVME_MAX_FILES);
    NvmeFile *f = &s->file[s->n_files];
    snprintf(f->path, sizeof(f->path), "%s/%s", dir, name);
    return s->n_files++;
}

// elems elements of elem bytes at the end of file; returns the plane's index
static int nvme_plane_add(NvmeStore *s, int file, size_t elem, size_t elems) {
    if (s->n_planes == NVME_MAX_PLANES) fatal("NVMe offload: more than %d planes", NVME_MAX_PLANES);
    NvmeFile *f = &s->file[file];
    s->plane[s->n_planes] = (NvmePlane){file, f->size, elem, elems};
    f->size += (off_t)nvme_round(elem * elems);   // every plane starts aligned
    return s->n_planes++;
}

static void *nvme_aligned_alloc(size_t bytes, const char *what) {
    void *p = NULL;
    if (posix_memalign(&p, NVME_ALIGN, bytes ? bytes : NVME_ALIGN) != 0) fatal("out of memory allocating %zu bytes for %s", bytes, what);
    return p;
}

// The open stores' files are removed at exit, also when a rank stops with an error
// (fatal exits); only a rank killed outright (SIGKILL) leaves its file behind.
static NvmeStore *g_nvme_open[4];
static void nvme_unlink_all(void) {
    for (int i = 0; i < 4; i++)
        for (int f = 0; g_nvme_open[i] && f < g_nvme_open[i]->n_files; f++) unlink(g_nvme_open[i]->file[f].path);
}
static void nvme_register(NvmeStore *s, int on) {
    static int hooked;
    if (!hooked) { atexit(nvme_unlink_all); hooked = 1; }
    for (int i = 0; i < 4; i++)
        if (on ? !g_nvme_open[i] : g_nvme_open[i] == s) { g_nvme_open[i] = on ? s : NULL; return; }
}

// Creates the files (their full size; with fast_init 0 written with zeros, which
// reserves the blocks now: a device too small fails here, not mid-run) and starts the
// I/O threads. bounce: NVME_BOUNCE_BYTES, aligned, the caller's (nvme_rw's staging).
// Returns 1, or 0 with a one-line err.
static int nvme_store_open(NvmeStore *s, int fast_init, void *bounce, char *err, size_t errn) {
    nvme_register(s, 1);
    char why[96] = "";
    const char *force = getenv("ZEROC_AIO");
    int want_ring = !(force && strstr(force, "threads")), want_direct = !(force && strstr(force, "buffered"));
    if (!want_direct) snprintf(why, sizeof(why), "ZEROC_AIO=%s", force);
    for (int i = 0; i < s->n_files; i++) {
        NvmeFile *f = &s->file[i];
        f->fd = want_direct ? open_regular(f->path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, "an NVMe swap file", err, errn) : -1;
        f->direct = f->fd >= 0;
        if (f->fd >= 0) {   // some filesystems accept the flag and refuse the I/O: probe one aligned write
            void *probe = nvme_aligned_alloc(NVME_ALIGN, "O_DIRECT probe");
            memset(probe, 0, NVME_ALIGN);
            if (pwrite(f->fd, probe, NVME_ALIGN, 0) != NVME_ALIGN) {
                snprintf(why, sizeof(why), "a direct write fails (%s)", strerror(errno));
                close(f->fd);
                f->fd = -1; f->direct = 0;
            }
            free(probe);
        } else if (want_direct && errno == EINVAL) {
            snprintf(why, sizeof(why), "the filesystem refuses O_DIRECT");
        }
        if (f->fd < 0) f->fd = open_regular(f->path, O_RDWR | O_CREAT | O_TRUNC, "an NVMe swap file", err, errn);
        if (f->fd < 0) return 0;
        fchmod(f->fd, 0600);   // the optimizer state: its owner's alone
        if (ftruncate(f->fd, f->size) != 0) { snprintf(err, errn, "%s: cannot size to %lld bytes (%s)", f->path, (long long)f->size, strerror(errno)); return 0; }
    }
    // the engine
    s->n_workers = s->aio.thread_count;
    s->w = (NvmeWorker *)xcalloc(sizeof(NvmeWorker) * s->n_workers, "I/O threads");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->done, NULL);
    int ring_err = 0;
    for (int i = 0; i < s->n_workers; i++) {
        NvmeWorker *w = &s->w[i];
        w->s = s;
        w->q_cap = 64;
        w->q = (NvmeReq *)xmalloc(sizeof(NvmeReq) * w->q_cap, "I/O queue");
        pthread_cond_init(&w->cv, NULL);
        if (want_ring && !ring_err) {
            int e = io_uring_queue_init((unsigned)s->aio.queue_depth, &w->ring, 0);
            if (e < 0) ring_err = -e;
            else w->have_ring = 1;
        }
    }
    if (ring_err)   // all threads alike
        for (int i = 0; i < s->n_workers; i++)
            if (s->w[i].have_ring) { io_uring_queue_exit(&s->w[i].ring); s->w[i].have_ring = 0; }
    for (int i = 0; i < s->n_workers; i++)
        if (pthread_create(&s->w[i].th, NULL, nvme_worker, &s->w[i]) != 0) fatal("NVMe offload: cannot start an I/O thread");
    int direct = s->file[0].direct;
    char how[200];
    if (s->w[0].have_ring)
        snprintf(how, sizeof(how), "io_uring, %d thread%s x queue depth %d, blocks of %lld KiB, %s submits, %s", s->n_workers,
                 s->n_workers > 1 ? "s" : "", s->aio.queue_depth, s->aio.block_size >> 10, s->aio.single_submit ? "single" : "batched",
                 s->aio.overlap_events ? "queues refilled as requests complete" : "waves of queue_depth requests");
    else
        snprintf(how, sizeof(how), "%d thread%s of blocking pread/pwrite (io_uring %s: aio.queue_depth, single_submit and "
                 "overlap_events have no effect), blocks of %lld KiB", s->n_workers, s->n_workers > 1 ? "s" : "",
                 ring_err ? strerror(ring_err) : "off: ZEROC_AIO", s->aio.block_size >> 10);
    snprintf(s->engine, sizeof(s->engine), "%s, %s%s%s", how, direct ? "O_DIRECT" : "buffered I/O (", direct ? "" : why,
             direct ? "" : "; the page cache holds what was written)");
    s->bounce = (char *)bounce;
    if (!fast_init) {   // zeros through the engine: the blocks reserved, the path exercised
        char *zeros = s->bounce;
        memset(zeros, 0, NVME_BOUNCE_BYTES);
        NvmeJob j;
        nvme_job_begin(s, &j);
        for (int i = 0; i < s->n_files; i++)
            for (off_t at = 0; at < s->file[i].size; at += NVME_BOUNCE_BYTES) {
                size_t n = s->file[i].size - at < (off_t)NVME_BOUNCE_BYTES ? (size_t)(s->file[i].size - at) : NVME_BOUNCE_BYTES;
                nvme_job_add(s, &j, i, 1, zeros, n, at);
            }
        nvme_job_end(s, &j);
        pthread_mutex_lock(&s->mu);
        while (j.remaining > 0) pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
        if (j.err) {
            snprintf(err, errn, "%s: writing its %lld bytes failed at byte %lld: %s", s->file[j.err_file].path,
                     (long long)s->file[j.err_file].size, j.err_off, strerror(j.err));
            return 0;
        }
    }
    memset(&s->st, 0, sizeof(s->st));
    return 1;
}

// Stops the threads, closes and removes the files.
static void nvme_store_close(NvmeStore *s) {
    if (s->w) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        for (int i = 0; i < s->n_workers; i++) pthread_cond_signal(&s->w[i].cv);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < s->n_workers; i++) {
            pthread_join(s->w[i].th, NULL);
            if (s->w[i].have_ring) io_uring_queue_exit(&s->w[i].ring);
            free(s->w[i].q);
        }
        free(s->w);
        s->w = NULL;
    }
    for (int i = 0; i < s->n_files; i++)
        if (s->file[i].fd >= 0) { close(s->file[i].fd); unlink(s->file[i].path); s->file[i].fd = -1; }
    nvme_register(s, 0);
}

// the statistics so far (busy time includes the job in flight now)
static NvmeStats nvme_stats(NvmeStore *s) {
    pthread_mutex_lock(&s->mu);
    NvmeStats r = s->st;
    if (s->active) r.busy_s += wall_time() - s->busy_since;
    pthread_mutex_unlock(&s->mu);
    return r;
}

// ----------------------------------------------------------------------------
// access

// elements [off, off + n) of a plane to (write 0) or from (write 1) host, complete on
// return. Any range: it moves through an aligned staging buffer, aligned chunk by
// aligned chunk (a write that covers part of a chunk reads the chunk first).
static void nvme_rw(NvmeStore *s, int plane, size_t off, size_t n, void *host, int write) {
    const NvmePlane *p = &s->plane[plane];
    off_t lo = p->base + (off_t)(off * p->elem), hi = lo + (off_t)(n * p->elem), end = (off_t)nvme_round((size_t)hi);
    for (off_t a = lo / NVME_ALIGN * NVME_ALIGN; a < hi; a += NVME_BOUNCE_BYTES) {
        off_t b = a + (off_t)NVME_BOUNCE_BYTES < end ? a + (off_t)NVME_BOUNCE_BYTES : end;
        off_t c0 = a > lo ? a : lo, c1 = b < hi ? b : hi;   // the caller's bytes in [a, b)
        NvmeJob j;
        if (!write || c0 > a || c1 < b) {
            nvme_job_begin(s, &j);
            nvme_job_add(s, &j, p->file, 0, s->bounce, (size_t)(b - a), a);
            nvme_job_end(s, &j);
            nvme_wait(s, &j);
        }
        if (!write) { memcpy((char *)host + (c0 - lo), s->bounce + (c0 - a), (size_t)(c1 - c0)); continue; }
        memcpy(s->bounce + (c0 - a), (const char *)host + (c0 - lo), (size_t)(c1 - c0));
        nvme_job_begin(s, &j);
        nvme_job_add(s, &j, p->file, 1, s->bounce, (size_t)(b - a), a);
        nvme_job_end(s, &j);
        nvme_wait(s, &j);
    }
}

// bytes a buffer needs for nvme_read_start of n elements of a plane
static size_t nvme_span_bytes(size_t elem, size_t n) { return nvme_round(elem * n) + NVME_ALIGN; }

// Starts reading elements [off, off + n) of a plane into buf (aligned, nvme_span_bytes)
// as job j; returns where the first element will be in buf (after nvme_wait).
static void *nvme_read_start(NvmeStore *s, NvmeJob *j, int plane, size_t off, size_t n, void *buf) {
    const NvmePlane *p = &s->plane[plane];
    off_t lo = p->base + (off_t)(off * p->elem), a = lo / NVME_ALIGN * NVME_ALIGN;
    size_t len = nvme_round((size_t)(lo + (off_t)(n * p->elem) - a));
    nvme_job_begin(s, j);
    nvme_job_add(s, j, p->file, 0, buf, len, a);
    nvme_job_end(s, j);
    return (char *)buf + (lo - a);
}

// ----------------------------------------------------------------------------
// the streamed pass

enum { NVME_READ = 1, NVME_WRITE = 2 };

typedef struct {
    int n;                       // planes streamed
    int plane[NVME_MAX_PLANES];  // which
    int mode[NVME_MAX_PLANES];   // NVME_READ | NVME_WRITE (write-only tiles start zeroed)
    size_t tile;                 // elements per tile (NVME_ALIGN-sized for every plane)
    int slots;                   // tiles in memory at once
    int pipeline_read, pipeline_write;
    char *buf;                   // slots x planes x tile
    NvmeJob *rjob, *wjob;        // per slot
    int *wpending;
} NvmeStream;

// the tile (elements) for a wish and a pass of `elems`: a multiple of NVME_ALIGN / 2, not above the pass
static size_t nvme_stream_tile(size_t want, size_t elems) {
    size_t unit = NVME_ALIGN / 2, t = round_up(want ? want : 1, unit);
    size_t all = round_up(elems ? elems : 1, unit);
    return t < all ? t : all;
}

// buf: slots x Σ round(tile x elem) bytes, NVME_ALIGN-aligned (the caller allocates it)
static size_t nvme_stream_buffer_bytes(const NvmeStore *s, const int *plane, int n, size_t tile, int slots) {
    size_t per = 0;
    for (int i = 0; i < n; i++) per += nvme_round(tile * s->plane[plane[i]].elem);
    return per * (size_t)slots;
}

static void nvme_stream_init(NvmeStream *ps, const int *plane, const int *mode, int n, size_t tile,
                             int slots, int pipeline_read, int pipeline_write, void *buf) {
    memset(ps, 0, sizeof(*ps));
    ps->n = n;
    for (int i = 0; i < n; i++) { ps->plane[i] = plane[i]; ps->mode[i] = mode[i]; }
    ps->tile = tile; ps->slots = slots;
    ps->pipeline_read = pipeline_read; ps->pipeline_write = pipeline_write;
    ps->buf = (char *)buf;
    ps->rjob = (NvmeJob *)xcalloc(sizeof(NvmeJob) * slots, "NVMe tiles");
    ps->wjob = (NvmeJob *)xcalloc(sizeof(NvmeJob) * slots, "NVMe tiles");
    ps->wpending = (int *)xcalloc(sizeof(int) * slots, "NVMe tiles");
}

static void nvme_stream_free(NvmeStream *ps) { free(ps->rjob); free(ps->wjob); free(ps->wpending); }

// plane i's buffer of slot k
static char *nvme_stream_tile_buf(const NvmeStore *s, const NvmeStream *ps, int k, int i) {
    size_t per = 0, at = 0;
    for (int j = 0; j < ps->n; j++) {
        size_t b = nvme_round(ps->tile * s->plane[ps->plane[j]].elem);
        if (j < i) at += b;
        per += b;
    }
    return ps->buf + (size_t)k * per + at;
}

typedef void (*NvmeTileFn)(size_t off, size_t n, void *const *tile, void *ctx);

// tile t: its slot's planes read (the read-only and read-write ones; write-only ones zeroed)
static void nvme_stream_read(NvmeStore *s, NvmeStream *ps, size_t t, size_t elems) {
    int k = (int)(t % ps->slots);
    if (ps->wpending[k]) { nvme_wait(s, &ps->wjob[k]); ps->wpending[k] = 0; }   // the slot's last tile is written
    size_t off = t * ps->tile, n = elems - off < ps->tile ? elems - off : ps->tile;
    nvme_job_begin(s, &ps->rjob[k]);
    for (int i = 0; i < ps->n; i++) {
        const NvmePlane *p = &s->plane[ps->plane[i]];
        char *b = nvme_stream_tile_buf(s, ps, k, i);
        if (ps->mode[i] & NVME_READ) nvme_job_add(s, &ps->rjob[k], p->file, 0, b, nvme_round(n * p->elem), p->base + (off_t)(off * p->elem));
        else memset(b, 0, nvme_round(n * p->elem));
    }
    nvme_job_end(s, &ps->rjob[k]);
}

// One pass over elements [0, elems) of the stream's planes, tile by tile in order:
// fn(off, n, tile, ctx) gets each tile's buffers (tile[i]: plane i of the stream) and
// updates them in place; they are then written back. With pipeline_read, tiles are read
// slots - 1 - pipeline_write ahead (tile k+1 while fn updates tile k); with
// pipeline_write, a tile's write is waited for only when its slot is needed again (tile
// k-1 written while fn updates tile k). Returns when every write is complete.
static void nvme_stream_run(NvmeStore *s, NvmeStream *ps, size_t elems, NvmeTileFn fn, void *ctx) {
    size_t tiles = ceil_div(elems, ps->tile);
    size_t ahead = ps->pipeline_read ? (size_t)(ps->slots - 1 - ps->pipeline_write) : 0;
    void *tile[NVME_MAX_PLANES];
    for (size_t t = 0; t < ahead && t < tiles; t++) nvme_stream_read(s, ps, t, elems);
    for (size_t t = 0; t < tiles; t++) {
        if (ahead && t + ahead < tiles) nvme_stream_read(s, ps, t + ahead, elems);
        if (!ahead) nvme_stream_read(s, ps, t, elems);
        int k = (int)(t % ps->slots);
        nvme_wait(s, &ps->rjob[k]);
        size_t off = t * ps->tile, n = elems - off < ps->tile ? elems - off : ps->tile;
        for (int i = 0; i < ps->n; i++) tile[i] = nvme_stream_tile_buf(s, ps, k, i);
        fn(off, n, tile, ctx);
        int writes = 0;
        for (int i = 0; i < ps->n; i++) writes |= ps->mode[i] & NVME_WRITE;
        if (!writes) continue;
        nvme_job_begin(s, &ps->wjob[k]);
        for (int i = 0; i < ps->n; i++) {
            const NvmePlane *p = &s->plane[ps->plane[i]];
            if (ps->mode[i] & NVME_WRITE)
                nvme_job_add(s, &ps->wjob[k], p->file, 1, tile[i], nvme_round(n * p->elem), p->base + (off_t)(off * p->elem));
        }
        nvme_job_end(s, &ps->wjob[k]);
        ps->wpending[k] = 1;
        if (!ps->pipeline_write) { nvme_wait(s, &ps->wjob[k]); ps->wpending[k] = 0; }
    }
    for (int k = 0; k < ps->slots; k++)
        if (ps->wpending[k]) { nvme_wait(s, &ps->wjob[k]); ps->wpending[k] = 0; }
}
