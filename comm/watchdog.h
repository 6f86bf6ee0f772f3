// comm/watchdog.h: --timeout S, a thread that ends the job when this rank makes no
// progress for S seconds.
#pragma once
#include "util/common.h"
#include <mpi.h>
#include <pthread.h>

// A stopped or dead rank, a hung device or a deadlock leaves the others waiting
// forever. After --timeout seconds without progress one line names the rank, its
// wait and phase, and MPI_Abort ends every rank with status 124, as timeout(1) does.
// Armed before MPI_Init, which waits for every rank, it first ends only this rank:
// MPI_Abort needs MPI, and mpirun ends the rest. Outside the steps only waits in
// collectives count; in them any stall does (comm_watchdog_steps, comm_phase).

#define EXIT_WATCHDOG 124

static struct {
    pthread_t thread;
    int running;
    volatile int stop;
    double timeout;
    void *comm;                      // for the NCCL abort
    volatile double last;            // the last progress
    const char *volatile phase;
    volatile int step;
    const char *volatile coll;       // the wait now, or NULL
    const char *volatile last_coll;
    double coll_t0, blocked_s;       // blocked_s: for --breakdown
    volatile int steps;              // in the steps: any stall counts
    volatile int mpi_up;             // MPI_Abort can end the job
} g_wd = {0};
static pthread_mutex_t g_wd_device_mu = PTHREAD_MUTEX_INITIALIZER;   // held while the thread uses g_wd.comm

static void wd_touch(void) { g_wd.last = wall_time(); }
// phase is a static string, step 1-based
static void comm_phase(const char *phase, int step) { g_wd.phase = phase; g_wd.step = step; wd_touch(); }
static void wd_coll_begin(const char *name) { g_wd.coll = name; wd_touch(); g_wd.coll_t0 = g_wd.last; }
static void wd_coll_end(void) { g_wd.last_coll = g_wd.coll; g_wd.coll = NULL; wd_touch(); g_wd.blocked_s += g_wd.last - g_wd.coll_t0; }
// seconds blocked in host-side waits since the last call
static double comm_blocked_seconds(void) { double s = g_wd.blocked_s; g_wd.blocked_s = 0; return s; }

static void comm_abort_device(void *comm);   // ncclCommAbort; nothing on the CPU
// NCCL's asynchronous error, or NULL: a failed collective never completes
static const char *comm_device_error(void *comm);

static void *wd_main(void *arg) {
    int rank = *(int *)arg;
    while (!g_wd.stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        // ncclCommGetAsyncError is safe from another thread, until the communicator is destroyed
        pthread_mutex_lock(&g_wd_device_mu);
        const char *nccl_error = g_wd.stop || !g_wd.mpi_up ? NULL : comm_device_error(g_wd.comm);
        if (!nccl_error) pthread_mutex_unlock(&g_wd_device_mu);
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
             "another rank (or a device) is stalled or dead: %s", rank, idle, g_wd.timeout, where, in,
             g_wd.mpi_up ? "aborting the job" : "ending this rank, and mpirun the job");
        if (!g_wd.mpi_up) _exit(EXIT_WATCHDOG);
        pthread_mutex_lock(&g_wd_device_mu);
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

// before the device communicator is destroyed: the thread no longer polls or aborts it
static void comm_watchdog_forget_device(void) {
    pthread_mutex_lock(&g_wd_device_mu);
    g_wd.comm = NULL;
    pthread_mutex_unlock(&g_wd_device_mu);
}

// the training loop's steps begin (1) or end (0)
static void comm_watchdog_steps(int on) { wd_touch(); g_wd.steps = on; }

// timeout <= 0: none; rank -1 before MPI_Init: the launcher's
static void comm_watchdog_start(void *comm, int rank, double timeout) {
    static int wd_rank;
    comm_watchdog_stop();
    if (timeout <= 0) return;
    wd_rank = rank >= 0 ? rank : launcher_rank();
    g_wd.timeout = timeout;
    g_wd.comm = comm;
    g_wd.stop = 0;
    wd_touch();
    if (pthread_create(&g_wd.thread, NULL, wd_main, &wd_rank) != 0) fatal("watchdog: cannot start its thread (%s)", strerror(errno));
    g_wd.running = 1;
}
