// comm/watchdog.h: --timeout S, a thread that ends the job when this rank makes no
// progress for S seconds, naming the collective it waits on. comm/comm.h includes it.
#pragma once
#include "util/common.h"
#include <mpi.h>
#include <pthread.h>

// The watchdog. A peer rank that stopped or died, a hung device or a deadlock leaves
// a rank waiting forever. If this rank makes no progress for --timeout seconds, a
// thread prints one line naming the rank, what it waits on and where in the step it
// is, aborts NCCL on the GPU, and calls MPI_Abort, which ends every rank of the job
// with status 124, as timeout(1) does. It runs from MPI_Init's return, once the flags
// give the limit (train/loop.h's train_startup), to MPI_Finalize's, so every
// collective of start-up and shutdown is watched too. Outside the training loop's
// steps it bounds each wait in a collective and not local work, since start-up may
// read data and checkpoints for longer than a step on every rank. During the steps
// (comm_watchdog_steps) progress is any collective's start or end and every phase the
// training loop enters with comm_phase: each micro-step, the optimizer step,
// validation, sampling, a checkpoint save. So the limit bounds the time of one of
// those, never a run. Every rank runs its own watchdog, so each one that can still
// act says what it waits on. MPI_Abort is the one MPI call made off the main thread:
// aborting a stuck job is what it is for, and Open MPI supports it.

#define EXIT_WATCHDOG 124

static struct {
    pthread_t thread;
    int running;
    volatile int stop;
    double timeout;
    void *comm;                      // the Comm (NCCL abort)
    volatile double last;            // wall_time() of the last progress
    const char *volatile phase;      // where in the step this rank is
    volatile int step;
    const char *volatile coll;       // the collective it waits on, NULL if none
    const char *volatile last_coll;  // the last one it waited on
    double coll_t0, blocked_s;       // when the current wait began; seconds spent waiting (--breakdown)
    volatile int steps;              // in the training loop's steps: any stall counts, not only a wait
} g_wd = {0};

static void wd_touch(void) { g_wd.last = wall_time(); }
// the training loop says where it is: phase is a static string, step is 1-based
static void comm_phase(const char *phase, int step) { g_wd.phase = phase; g_wd.step = step; wd_touch(); }
static void wd_coll_begin(const char *name) { g_wd.coll = name; wd_touch(); g_wd.coll_t0 = g_wd.last; }
static void wd_coll_end(void) { g_wd.last_coll = g_wd.coll; g_wd.coll = NULL; wd_touch(); g_wd.blocked_s += g_wd.last - g_wd.coll_t0; }
// Seconds this rank spent blocked in collectives since the last call, for the step
// line's breakdown. It counts host-side waits; with NCCL the device waits instead,
// and that is not counted.
static double comm_blocked_seconds(void) { double s = g_wd.blocked_s; g_wd.blocked_s = 0; return s; }

static void comm_abort_device(void *comm);   // ncclCommAbort on the GPU; nothing on the CPU
// NCCL's asynchronous error, such as a peer gone or a network failure; NULL when there is
// none. A failed collective never completes on the stream, so the host would wait forever.
static const char *comm_device_error(void *comm);

static void *wd_main(void *arg) {
    int rank = *(int *)arg;
    while (!g_wd.stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        // NCCL's own error first: a failed collective stops every rank at once.
        // ncclCommGetAsyncError is safe from another thread; PyTorch's watchdog uses it.
        const char *nccl_error = g_wd.stop ? NULL : comm_device_error(g_wd.comm);
        if (nccl_error) {
            diag("error", "rank %d: NCCL reports %s (in %s of step %d, the last collective: %s): aborting the job", rank,
                 nccl_error, g_wd.phase ? g_wd.phase : "start-up", g_wd.step, g_wd.last_coll ? g_wd.last_coll : "none");
            comm_abort_device(g_wd.comm);
            MPI_Abort(MPI_COMM_WORLD, 1);
            _exit(1);
        }
        double idle = wall_time() - g_wd.last;
        if (g_wd.stop || idle < g_wd.timeout || (!g_wd.steps && !g_wd.coll)) continue;
        const char *coll = g_wd.coll, *phase = g_wd.phase ? g_wd.phase : "start-up";
        char where[256];
        if (coll) snprintf(where, sizeof(where), "waits in %s", coll);
        else snprintf(where, sizeof(where), "is not in a collective (the last: %s)", g_wd.last_coll ? g_wd.last_coll : "none");
        char in[160];
        if (g_wd.step > 0) snprintf(in, sizeof(in), "%s of step %d", phase, g_wd.step);
        else snprintf(in, sizeof(in), "%s", phase);
        diag("error", "watchdog: rank %d made no progress for %.0f s (--timeout %g): it %s, in %s; "
             "another rank (or a device) is stalled or dead: aborting the job", rank, idle, g_wd.timeout, where, in);
        comm_abort_device(g_wd.comm);
        MPI_Abort(MPI_COMM_WORLD, EXIT_WATCHDOG);
        _exit(EXIT_WATCHDOG);
    }
    return NULL;
}

static void comm_watchdog_stop(void) {
    if (!g_wd.running) return;
    g_wd.stop = 1;
    pthread_join(g_wd.thread, NULL);
    g_wd.running = 0;
}

// The training loop's steps begin (on = 1) or end (0): see above
static void comm_watchdog_steps(int on) { wd_touch(); g_wd.steps = on; }

// timeout <= 0: no watchdog. It starts outside the steps: only waits in collectives count.
static void comm_watchdog_start(void *comm, int rank, double timeout) {
    static int wd_rank;
    comm_watchdog_stop();
    if (timeout <= 0) return;
    wd_rank = rank;
    g_wd.timeout = timeout;
    g_wd.comm = comm;
    g_wd.stop = 0;
    wd_touch();
    if (pthread_create(&g_wd.thread, NULL, wd_main, &wd_rank) != 0) fatal("watchdog: cannot start its thread (%s)", strerror(errno));
    g_wd.running = 1;
}
