// comm/comm.h: the communicator every collective of both trainers goes through.
// The CPU build runs MPI on host buffers; ranks come from mpirun, srun or a plain run,
// a world of one. The CUDA build takes device buffers, with --comm choosing NCCL, on a
// communication stream ordered against the compute stream by events, or host-staged MPI,
// so that several ranks can share one GPU. Host scalars such as the loss always go
// through comm_all_reduce_host, MPI.
//
// The semantics are NCCL's, so the backends are interchangeable:
//   all_reduce(buf, n)            in place, every rank ends with the reduction
//   reduce_scatter(send, recv, n) send holds world*n elements; rank r receives
//                                 the reduction of elements [r*n, (r+1)*n).
//                                 In place when recv == send + rank*n.
//   all_gather(send, recv, n)     recv holds world*n; rank r's n elements land
//                                 at recv + r*n. In place when send == recv + rank*n.
//   barrier()
// all_reduce and reduce_scatter are non-blocking (comm_iall_reduce, comm_ireduce_scatter:
// a CommRequest finished by comm_wait()); all_gather comes in both forms.
//
// Each rank counts every call's bytes in the ZeRO paper's units: an all-gather or a
// reduce-scatter over X bytes counts X, an all-reduce 2X.
//
// The watchdog (--timeout S) is in comm/watchdog.h.
#pragma once
#include "comm/watchdog.h"
#include <ctype.h>
#include <glob.h>
#include <limits.h>
#ifdef __CUDACC__
#define COMM_DEVICE 1
#include "cuda/common.cuh"
#include <nccl.h>
enum { COMM_BACKEND_NCCL = 0, COMM_BACKEND_MPI = 1 };
#else
#define COMM_DEVICE 0
#endif

typedef enum { DT_F32 = 0, DT_BF16, DT_I32, DT_F64, DT_U8, DT_F16 } CommDType;
#define DT_FLOATX (FLOATX_FP16 ? DT_F16 : DT_BF16)   // the GPU build's floatX (util/common.h)
typedef enum { OP_SUM = 0, OP_AVG, OP_MAX, OP_MIN } CommOp;
typedef enum { COLL_ALL_REDUCE = 0, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_ALL_TO_ALL, N_COLL } CollKind;
static const char *const COLL_NAMES[N_COLL] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"};
// where a collective's bytes go: among the ranks of one node, or over the link between nodes;
// SCOPE_GROUP is hpZ's group of consecutive ranks, within a node or not
typedef enum { SCOPE_WORLD = 0, SCOPE_NODE, SCOPE_ACROSS, SCOPE_GROUP } CommScope;

static size_t dtype_size(CommDType t) { return t == DT_F64 ? 8 : t == DT_BF16 || t == DT_F16 ? 2 : t == DT_U8 ? 1 : 4; }

typedef struct {
    int rank, world;
    int local_rank, local_world;   // within the node: selects the GPU
    int argc; char **argv;         // the command line (after MPI_Init), for messages that repeat it
    MPI_Comm mpi;
    long long bytes[N_COLL];       // counted bytes since the last comm_reset_counters
    long long calls[N_COLL];
    long long intra_bytes[N_COLL], cross_bytes[N_COLL];   // the same bytes, by where they go
    // The nodes, for counting and for ZeRO++'s hierarchical collectives (comm/nodes.h):
    // node_size ranks per node in consecutive blocks, or 0 when the nodes are not such blocks.
    int node_size, n_nodes, node, node_rank;
    MPI_Comm node_comm, across_comm;   // this rank's node; the ranks of every node with this node_rank
    int group_size;                    // ZeRO++ hpZ: blocks of group_size ranks, comm_split_groups
    MPI_Comm group_comm;
#if COMM_DEVICE
    int backend;                   // COMM_BACKEND_NCCL or COMM_BACKEND_MPI (host-staged)
    int device, has_device;        // has_device: comm_attach_device ran; the estimator never needs it
    ncclComm_t nccl;
    cudaStream_t compute;          // the trainer's kernels run here
    cudaStream_t stream;           // collectives run here (NCCL)
    cudaEvent_t events[64];        // a ring of events ordering the two streams
    int next_event;
    void *stage;                   // pinned host staging for the MPI backend
    size_t stage_bytes;
#endif
} Comm;

typedef struct {
    MPI_Request req;
    const char *name;     // the collective, for the watchdog
    int active;
    CommOp op;            // OP_AVG is finished, scaled, at wait time
    CommDType dtype;
    void *scale_buf;      // what to scale for OP_AVG
    size_t scale_n;
    void *move_dst;       // in-place reduce-scatter: MPI leaves the result at the front
    size_t move_bytes;
#if COMM_DEVICE
    cudaEvent_t done;     // NCCL: recorded on the communication stream
#endif
} CommRequest;

static MPI_Datatype mpi_dtype(CommDType t) {
    switch (t) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_I32: return MPI_INT;
    case DT_U8: return MPI_BYTE;
    default: fatal("comm: the MPI backend reduces fp32, fp64 and int32 only (bf16 and fp16 travel as bytes in gathers)"); return MPI_BYTE;
    }
}
static MPI_Op mpi_op(CommOp op) { return op == OP_MAX ? MPI_MAX : op == OP_MIN ? MPI_MIN : MPI_SUM; }
// MPI counts are int: a larger message stops every rank with one line, never wraps
static int mpi_count(size_t n) {
    if (n > (size_t)INT_MAX)
        fatal("comm: one message of %zu elements is over MPI's count limit (2^31-1): more ranks, or smaller units (the unit holding the largest tensor), shrink it", n);
    return (int)n;
}

// Which ranks form a node: MPI's shared-memory split, or for tests ZEROC_RANKS_PER_NODE=n,
// blocks of n ranks. ZeRO++ needs consecutive blocks of one size, as mpirun and srun place
// ranks; otherwise node_size is 0.
static void comm_nodes_init(Comm *c) {
    const char *env = getenv("ZEROC_RANKS_PER_NODE");
    int n = env && *env ? atoi(env) : 0;
    if (env && *env && (n < 1 || c->world % n))
        fatal("ZEROC_RANKS_PER_NODE=%s: a count of ranks per node that divides the world of %d (a test-only override)", env, c->world);
    wd_coll_begin("the nodes (ZeRO++'s hierarchy)");
    int regular = n ? 1 : c->world % c->local_world == 0 && c->rank / c->local_world * c->local_world + c->local_rank == c->rank;
    if (!n) n = c->local_world;
    MPI_Allreduce(MPI_IN_PLACE, &regular, 1, MPI_INT, MPI_MIN, c->mpi);
    int same = n, most = n;   // every node the same size
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, c->mpi);
    MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT, MPI_MAX, c->mpi);
    c->node_size = regular && same == most ? n : 0;
    int leaders = c->local_rank == 0;
    MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, c->mpi);
    c->n_nodes = c->node_size ? c->world / c->node_size : leaders;
    c->node = c->node_size ? c->rank / c->node_size : 0;
    c->node_rank = c->node_size ? c->rank % c->node_size : c->local_rank;
    c->node_comm = c->across_comm = c->group_comm = MPI_COMM_NULL;
    if (c->node_size) {
        MPI_Comm_split(c->mpi, c->node, c->node_rank, &c->node_comm);
        MPI_Comm_split(c->mpi, c->node_rank, c->node, &c->across_comm);
    }
    wd_coll_end();
    if (env && *env && c->rank == 0)
        printf("zeroc: ZEROC_RANKS_PER_NODE=%d (test-only): ranks 0-%d, %d at a time, count as %d node%s\n", c->node_size, c->world - 1,
               c->node_size, c->n_nodes, c->n_nodes == 1 ? "" : "s");
}

// MPI: rank and world, and nothing collective after MPI_Init. MPI_Init itself waits
// for every rank: a watched wait when the trainer armed its watchdog (train/loop.h).
static void comm_init_world(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof(*c));
    int provided;
    test_stop_point("mpi-init");
    wd_coll_begin("MPI_Init (every rank joining the job)");
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    g_wd.mpi_up = 1;
    wd_coll_end();
    c->argc = *argc;
    c->argv = *argv;
    c->mpi = MPI_COMM_WORLD;
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->world);
    g_error_rank = c->rank;
}

// Collective: the local rank, among the ranks sharing a node's memory, as mpirun and
// srun both place them. The GPU trainer takes its device afterwards (comm_attach_device).
static void comm_init_node(Comm *c) {
    MPI_Comm local;
    wd_coll_begin("MPI_Comm_split_type (the ranks of each node)");
    MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    wd_coll_end();
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_world);
    MPI_Comm_free(&local);
    comm_nodes_init(c);
}

// MPI, rank, world and the ranks of this node, for the tests' programs; the trainer calls the two halves
static void comm_init(Comm *c, int *argc, char ***argv) {
    comm_init_world(c, argc, argv);
    comm_init_node(c);
}

// MPI_Finalize as a watched wait, since Open MPI's waits for every rank; then the watchdog stops
static void comm_finalize_mpi(void) {
    test_stop_point("finalize");
    comm_phase("shutdown", 0);
    wd_coll_begin("MPI_Finalize");
    MPI_Finalize();
    comm_watchdog_stop();
}


// SCOPE_GROUP: ranks k*size .. k*size + size-1, as DeepSpeed's hpZ groups; collective
static void comm_split_groups(Comm *c, int size) {
    c->group_size = size;
    wd_coll_begin("the hpZ groups (ZeRO++)");
    MPI_Comm_split(c->mpi, c->rank / size, c->rank % size, &c->group_comm);
    wd_coll_end();
}

static void comm_reset_counters(Comm *c) {
    memset(c->bytes, 0, sizeof(c->bytes)); memset(c->calls, 0, sizeof(c->calls));
    memset(c->intra_bytes, 0, sizeof(c->intra_bytes)); memset(c->cross_bytes, 0, sizeof(c->cross_bytes));
}

// With several nodes a collective over the world crosses the link, as the ZeRO++ paper
// counts ZeRO-3's every byte; one within a node stays there.
static int comm_scope_crosses(const Comm *c, CommScope scope) {
    int group_in_node = c->n_nodes == 1 || (c->node_size && c->group_size && c->node_size % c->group_size == 0);
    return scope == SCOPE_ACROSS || (scope == SCOPE_WORLD && c->n_nodes > 1) || (scope == SCOPE_GROUP && !group_in_node);
}
static void comm_count_in(Comm *c, CollKind k, long long bytes, CommScope scope) {
    c->bytes[k] += bytes; c->calls[k]++;
    (comm_scope_crosses(c, scope) ? c->cross_bytes : c->intra_bytes)[k] += bytes;
}
static void comm_count(Comm *c, CollKind k, long long bytes) { comm_count_in(c, k, bytes, SCOPE_WORLD); }

static void scale_buffer(void *buf, size_t n, CommDType t, double s) {
    if (t == DT_F32) { float *p = (float *)buf; for (size_t i = 0; i < n; i++) p[i] = (float)(p[i] * s); }
    else if (t == DT_F64) { double *p = (double *)buf; for (size_t i = 0; i < n; i++) p[i] *= s; }
    else fatal("comm: OP_AVG needs a floating-point buffer");
}

static void comm_wait_mpi(Comm *c, CommRequest *r) {
    if (!r->active) return;
    wd_coll_begin(r->name);
    MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    wd_coll_end();
    r->active = 0;
    if (r->move_dst) memmove(r->move_dst, r->scale_buf, r->move_bytes);
    if (r->op == OP_AVG && c->world > 1)
        scale_buffer(r->move_dst ? r->move_dst : r->scale_buf, r->scale_n, r->dtype, 1.0 / c->world);
}

static CommRequest comm_iall_reduce_mpi(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    CommRequest r = {0};
    comm_count(c, COLL_ALL_REDUCE, 2LL * n * dtype_size(t));
    r.name = "all_reduce";
    r.active = 1; r.op = op; r.dtype = t; r.scale_buf = buf; r.scale_n = n;
    MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(n), mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
    return r;
}

static CommRequest comm_ireduce_scatter_mpi(Comm *c, void *send, void *recv, size_t n, CommDType t, CommOp op) {
    CommRequest r = {0};
    size_t es = dtype_size(t);
    comm_count(c, COLL_REDUCE_SCATTER, (long long)n * c->world * es);
    r.name = "reduce_scatter";
    r.active = 1; r.op = op; r.dtype = t; r.scale_n = n;
    if ((char *)recv == (char *)send + (size_t)c->rank * n * es) {
        // in place, NCCL's convention: MPI writes the result at the front of the buffer
        MPI_Ireduce_scatter_block(MPI_IN_PLACE, send, mpi_count(n), mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
        r.scale_buf = send;
        if (c->rank != 0) { r.move_dst = recv; r.move_bytes = n * es; }
    } else {
        MPI_Ireduce_scatter_block(send, recv, mpi_count(n), mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
        r.scale_buf = recv;
    }
    return r;
}

static CommRequest comm_iall_gather_mpi(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    CommRequest r = {0};
    size_t es = dtype_size(t);
    comm_count(c, COLL_ALL_GATHER, (long long)n * c->world * es);
    r.name = "all_gather";
    r.active = 1; r.op = OP_SUM; r.dtype = t;
    // gathers move bytes: bf16 needs no MPI type of its own
    int bytes = mpi_count(n * es);
    if ((const char *)send == (char *)recv + (size_t)c->rank * n * es)
        MPI_Iallgather(MPI_IN_PLACE, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, c->mpi, &r.req);
    else
        MPI_Iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, c->mpi, &r.req);
    return r;
}

// ----------------------------------------------------------------------------
// the public calls

static void comm_all_reduce_host(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    CommRequest r = comm_iall_reduce_mpi(c, buf, n, t, op);
    comm_wait_mpi(c, &r);
}
static void comm_barrier(Comm *c) { wd_coll_begin("barrier"); MPI_Barrier(c->mpi); wd_coll_end(); }

// A control all-reduce outside the byte accounting: the bitwise OR of every rank's
// flags, for the per-step agreement on signals (train/preempt.h).
static int comm_control_or(Comm *c, int flags) {
    wd_coll_begin("all_reduce (the per-step signal agreement)");
    MPI_Allreduce(MPI_IN_PLACE, &flags, 1, MPI_INT, MPI_BOR, c->mpi);
    wd_coll_end();
    return flags;
}
// root's bytes to every rank, in host memory in every build, not counted: the sampled tokens
static void comm_broadcast_host(Comm *c, void *buf, size_t bytes, int root) { wd_coll_begin("broadcast (sampled tokens)"); MPI_Bcast(buf, mpi_count(bytes), MPI_BYTE, root, c->mpi); wd_coll_end(); }

#if !COMM_DEVICE
// CPU build: buffers are host memory, MPI does everything
static void comm_attach_device(Comm *c) { (void)c; }   // the CPU trainer's buffers are host memory
static void comm_setup_backend(Comm *c, const char *name) { }
static void comm_abort_device(void *comm) { }
static const char *comm_device_error(void *comm) { (void)comm; return NULL; }
static void comm_finalize(Comm *c) { comm_finalize_mpi(); }
static void comm_wait(Comm *c, CommRequest *r) { comm_wait_mpi(c, r); }
static CommRequest comm_iall_reduce(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    return comm_iall_reduce_mpi(c, buf, n, t, op);
}
static CommRequest comm_ireduce_scatter(Comm *c, void *send, void *recv, size_t n, CommDType t, CommOp op) {
    return comm_ireduce_scatter_mpi(c, send, recv, n, t, op);
}
static CommRequest comm_iall_gather(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    return comm_iall_gather_mpi(c, send, recv, n, t);
}
#else
// CUDA build: buffers are device memory.
#define COMM_NCCL_CHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) fatal("NCCL: %s (%s:%d)", ncclGetErrorString(r_), __FILE__, __LINE__); } while (0)

static int comm_agree(Comm *c, int ok, char *err, size_t errn);

#ifndef ZERO_STAGE
#define ZERO_STAGE 0   // the trainers are built with -DZERO_STAGE=k (make ZERO=k)
#endif

// Why this rank has no GPU to train on, in the user's terms: without a /dev/nvidia* device
// file there is no NVIDIA GPU (or driver) at all, and the CUDA runtime's own words ("CUDA driver
// version is insufficient for CUDA runtime version": it found no driver) would mislead.
static void comm_no_gpu_reason(const Comm *c, cudaError_t e, char *out, size_t n) {
    char host[64] = "";
    if (c->local_world < c->world) {   // several nodes: say which one
        char name[MPI_MAX_PROCESSOR_NAME];
        int len;
        MPI_Get_processor_name(name, &len);
        snprintf(host, sizeof(host), " on %.40s (rank %d)", name, c->rank);
    }
    glob_t g;
    int devices = glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    if (!devices) snprintf(out, n, "no NVIDIA GPU found%s (no /dev/nvidia*)", host);
    else snprintf(out, n, "no usable NVIDIA GPU%s: /dev/nvidia* exists, but the CUDA runtime says \"%s\" "
                  "(this build needs a driver for CUDA %d.%d: nvidia-smi shows the installed one)", host,
                  e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
}

// The command that runs this same job on the CPU trainer: its build at this ZeRO stage, then
// mpirun with what Open MPI needs as root (--allow-run-as-root) and for more ranks than cores
// (--oversubscribe), and this run's own flags, quoted for the shell where they need it.
static void comm_cpu_command(const Comm *c, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "make train_gpt_cpu ZERO=%d && ", ZERO_STAGE);
    if (c->world > 1 && k < n)
        k += (size_t)snprintf(out + k, n - k, "mpirun %s--oversubscribe -np %d ", geteuid() == 0 ? "--allow-run-as-root " : "", c->world);
    if (k < n) k += (size_t)snprintf(out + k, n - k, "./train_gpt_cpu");
    for (int i = 1; i < c->argc && k + 4 < n; i++) {
        const char *a = c->argv[i];
        int plain = a[0] != 0;
        for (const char *p = a; *p; p++) plain &= isalnum((unsigned char)*p) || strchr("_./=:,+-", *p) != NULL;
        if (plain) { k += (size_t)snprintf(out + k, n - k, " %s", a); continue; }
        k += (size_t)snprintf(out + k, n - k, " '");
        for (const char *p = a; *p && k + 5 < n; p++) {
            if (*p == '\'') k += (size_t)snprintf(out + k, n - k, "'\\''");
            else out[k++] = *p;
        }
        if (k + 1 < n) { out[k++] = '\''; out[k] = 0; }
    }
}

// This rank's GPU, its streams and events. It comes after the flags, so that what
// needs no GPU (--help, the estimator, a bad flag) answers on a machine without one.
// Without a GPU the ranks agree on it; rank 0 says so once, with the CPU trainer's
// command for the same run, and every rank exits with status 1.
static void comm_attach_device(Comm *c) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    char why[1024] = "";
    int ok = e == cudaSuccess && ndev > 0;
    if (!ok) comm_no_gpu_reason(c, e, why, sizeof(why));
    if (!comm_agree(c, ok, why, sizeof(why))) {
        if (c->rank == 0) {
            char cmd[4096];
            comm_cpu_command(c, cmd, sizeof(cmd));
            diag("error", "%s: train_gpt needs an NVIDIA GPU per rank; the CPU trainer runs the same job:", why);
            fprintf(stderr, "  %s\n", cmd);
        }
        exit(1);
    }
    c->device = c->local_rank % ndev;   // one GPU per local rank; ranks beyond the GPU count share
    cudaCheck(cudaSetDevice(c->device));
    cudaCheck(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 64; i++) cudaCheck(cudaEventCreateWithFlags(&c->events[i], cudaEventDisableTiming));
    c->backend = COMM_BACKEND_MPI;
    c->has_device = 1;
}

// The NCCL this process loaded, which may be newer than the nccl.h it was built with (the
// soname is libnccl.so.2 for every 2.x): its version as text ("2.30.1") and its code
// (ncclGetVersion: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before),
// and where it was loaded from (/proc/self/maps: "?" where that cannot be read).
#define NCCL_SHARED_GPU_VERSION 23000   // 2.30: several ranks on one GPU, with NCCL_MULTI_RANK_GPU_ENABLE=1
static int comm_nccl_version(char *text, size_t n) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    int big = v >= 10000;
    snprintf(text, n, "%d.%d.%d", big ? v / 10000 : v / 1000, big ? v / 100 % 100 : v / 100 % 10, v % 100);
    return v;
}
static const char *comm_nccl_path(char *path, size_t n) {
    snprintf(path, n, "?");
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    while (f && fgets(line, sizeof(line), f)) {
        char *p = strchr(line, '/');
        if (!p || !strstr(p, "/libnccl")) continue;
        p[strcspn(p, "\n")] = 0;
        snprintf(path, n, "%s", p);
        break;
    }
    if (f) fclose(f);
    return path;
}

// --comm auto|nccl|mpi. auto: one rank needs no backend (comm_alone: no NCCL bootstrap, no
// MPI); ranks sharing a GPU get the host-staged MPI collectives (NCCL refuses two ranks on
// one GPU before 2.30, and from 2.30 on allows it only as an experiment the user asks for:
// --comm nccl with NCCL_MULTI_RANK_GPU_ENABLE=1); otherwise NCCL, which gets its unique id
// from rank 0 over MPI.
static void comm_setup_backend(Comm *c, const char *name) {
    int automatic = strcmp(name, "auto") == 0;
    if (strcmp(name, "mpi") == 0 || (automatic && c->world == 1)) { c->backend = COMM_BACKEND_MPI; return; }
    int ndev = 0;
    cudaCheck(cudaGetDeviceCount(&ndev));
    // decided on every rank from the same numbers (the most crowded node; whether every rank may share
    // a GPU): all ranks take the same backend or all stop; none hangs in init
    int crowded = c->local_world > ndev ? c->local_world : 0;
    wd_coll_begin("all_reduce (ranks per GPU)");
    MPI_Allreduce(MPI_IN_PLACE, &crowded, 1, MPI_INT, MPI_MAX, c->mpi);
    wd_coll_end();
    char ver[32], path[512];
    int code = comm_nccl_version(ver, sizeof(ver));
    if (crowded) {
        const char *env = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
        int shares = code >= NCCL_SHARED_GPU_VERSION && env && strcmp(env, "1") == 0;
        wd_coll_begin("all_reduce (ranks per GPU)");
        MPI_Allreduce(MPI_IN_PLACE, &shares, 1, MPI_INT, MPI_MIN, c->mpi);
        wd_coll_end();
        if (automatic) {
            if (c->rank == 0)
                printf("zeroc: %d ranks share the GPUs of a node: host-staged MPI collectives (--comm auto): NCCL %s %s\n", crowded, ver,
                       code < NCCL_SHARED_GPU_VERSION ? "refuses several ranks on one GPU (2.30 and later allow it)"
                                                      : "runs them only as an experiment (--comm nccl with NCCL_MULTI_RANK_GPU_ENABLE=1)");
            c->backend = COMM_BACKEND_MPI;
            return;
        }
        if (code < NCCL_SHARED_GPU_VERSION)
            fatal("--comm nccl: %d ranks share %d GPU%s on this node, and the library loaded here is NCCL %s, which refuses that "
                  "before 2.30 (2.30 and later allow it with NCCL_MULTI_RANK_GPU_ENABLE=1); use --comm mpi (host-staged collectives)",
                  crowded, ndev, ndev == 1 ? "" : "s", ver);
        if (!shares)
            fatal("--comm nccl: %d ranks share %d GPU%s on this node: NCCL %s runs them only with NCCL_MULTI_RANK_GPU_ENABLE=1 "
                  "in every rank's environment (experimental); set it, or use --comm mpi (host-staged collectives)",
                  crowded, ndev, ndev == 1 ? "" : "s", ver);
    }
    ncclUniqueId id;
    if (c->rank == 0) COMM_NCCL_CHECK(ncclGetUniqueId(&id));
    wd_coll_begin("NCCL's start (ncclCommInitRank)");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, c->mpi);
    ncclResult_t r = ncclCommInitRank(&c->nccl, c->world, id, c->rank);
    wd_coll_end();
    if (r != ncclSuccess)
        fatal("NCCL %s: ncclCommInitRank failed: %s%s", ver, ncclGetErrorString(r),
              r == ncclInvalidUsage ? " (two ranks on one GPU? use --comm mpi)" : "");
    c->backend = COMM_BACKEND_NCCL;
    if (c->rank == 0)
        printf("zeroc: NCCL %s (%s), %d rank%s%s\n", ver, comm_nccl_path(path, sizeof(path)), c->world, c->world > 1 ? "s" : "",
               crowded ? ", several on one GPU: NCCL_MULTI_RANK_GPU_ENABLE=1 (experimental)" : "");
}

// the watchdog, before MPI_Abort: NCCL's kernels may be spinning on a dead peer
static void comm_abort_device(void *comm) {
    Comm *c = (Comm *)comm;
    if (c && c->backend == COMM_BACKEND_NCCL && c->nccl) ncclCommAbort(c->nccl);
}
static const char *comm_device_error(void *comm) {
    Comm *c = (Comm *)comm;
    ncclResult_t r = ncclSuccess;
    if (!c || c->backend != COMM_BACKEND_NCCL || !c->nccl || ncclCommGetAsyncError(c->nccl, &r) != ncclSuccess) return NULL;
    return r == ncclSuccess || r == ncclInProgress ? NULL : ncclGetErrorString(r);
}

static void comm_finalize(Comm *c) {
    if (c->has_device) {
        wd_coll_begin("the device's last work (NCCL included) at exit");   // a dead peer's NCCL kernel would spin here
        cudaStreamSynchronize(c->compute);
        cudaStreamSynchronize(c->stream);
        wd_coll_end();
        comm_watchdog_forget_device();   // it polls NCCL until MPI_Finalize
        if (c->backend == COMM_BACKEND_NCCL) ncclCommDestroy(c->nccl);
        if (c->stage) cudaFreeHost(c->stage);
    }
    comm_finalize_mpi();
}

static ncclDataType_t nccl_dtype(CommDType t) {
    switch (t) {
    case DT_F32: return ncclFloat32;
    case DT_BF16: return ncclBfloat16;
    case DT_F16: return ncclFloat16;
    case DT_F64: return ncclFloat64;
    case DT_I32: return ncclInt32;
    default: return ncclUint8;
    }
}
static ncclRedOp_t nccl_op(CommOp op) { return op == OP_AVG ? ncclAvg : op == OP_MAX ? ncclMax : op == OP_MIN ? ncclMin : ncclSum; }

static cudaEvent_t comm_next_event(Comm *c) { cudaEvent_t e = c->events[c->next_event]; c->next_event = (c->next_event + 1) % 64; return e; }

// NCCL: the communication stream first waits for everything queued on the compute
// stream, so the data to send is ready and a buffer about to be overwritten, such as
// stage 3's released gather space, is no longer read.
static void comm_nccl_begin(Comm *c) {
    cudaEvent_t ready = comm_next_event(c);
    cudaCheck(cudaEventRecord(ready, c->compute));
    cudaCheck(cudaStreamWaitEvent(c->stream, ready, 0));
}
static CommRequest comm_nccl_end(Comm *c, const char *name) {
    CommRequest r;
    memset(&r, 0, sizeof(r));
    r.name = name;
    g_wd.last_coll = name;   // enqueued: the host waits for it later, at a synchronization
    wd_touch();
    r.done = comm_next_event(c);
    cudaCheck(cudaEventRecord(r.done, c->stream));
    r.active = 1;
    return r;
}

// MPI backend: pinned host staging
static void *comm_stage(Comm *c, size_t bytes) {
    if (bytes > c->stage_bytes) {
        if (c->stage) cudaFreeHost(c->stage);
        cudaCheck(cudaMallocHost(&c->stage, bytes));
        c->stage_bytes = bytes;
    }
    return c->stage;
}
// Reductions of bf16 or fp16 over MPI: widen to fp32 on the host, reduce, round back.
static void comm_mpi_reduce_device(Comm *c, void *send, void *recv, size_t n_in, size_t n_out, CommDType t, CommOp op, int scatter) {
    int x16 = t == DT_BF16 || t == DT_F16;
    size_t es = dtype_size(t), wide = x16 ? 4 : es;
    char *h = (char *)comm_stage(c, n_in * wide + n_in * es);
    char *raw = h + n_in * wide;
    cudaCheck(cudaStreamSynchronize(c->compute));
    cudaCheck(cudaMemcpy(raw, send, n_in * es, cudaMemcpyDeviceToHost));
    const uint16_t *bits = (const uint16_t *)raw;
    if (x16) for (size_t i = 0; i < n_in; i++) ((float *)h)[i] = t == DT_F16 ? fp16_to_float(bits[i]) : bf16_to_float(bits[i]);
    else memcpy(h, raw, n_in * es);
    CommDType wt = x16 ? DT_F32 : t;
    wd_coll_begin(scatter ? "reduce_scatter (host-staged)" : "all_reduce (host-staged)");
    if (scatter) MPI_Reduce_scatter_block(MPI_IN_PLACE, h, mpi_count(n_out), mpi_dtype(wt), mpi_op(op), c->mpi);
    else MPI_Allreduce(MPI_IN_PLACE, h, mpi_count(n_out), mpi_dtype(wt), mpi_op(op), c->mpi);
    wd_coll_end();
    if (op == OP_AVG && c->world > 1) scale_buffer(h, n_out, wt, 1.0 / c->world);
    const float *wide_out = (const float *)h;
    if (x16) for (size_t i = 0; i < n_out; i++)
        ((uint16_t *)raw)[i] = t == DT_F16 ? float_to_fp16_rne(wide_out[i]) : float_to_bf16_rne(wide_out[i]);
    else memcpy(raw, h, n_out * es);
    cudaCheck(cudaMemcpy(recv, raw, n_out * es, cudaMemcpyHostToDevice));
}

// At one rank every collective is the identity: an average over one rank, the
// gather of one shard. So nothing is staged or launched except a copy when the
// result goes elsewhere. The volume is still counted, as the CPU trainer counts it.
static int comm_alone(Comm *c, void *recv, const void *send, size_t bytes) {
    if (c->world > 1) return 0;
    if (recv != send) cudaCheck(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, c->compute));
    return 1;
}
static CommRequest comm_done(void) { CommRequest r; memset(&r, 0, sizeof(r)); return r; }

static void comm_wait(Comm *c, CommRequest *r) {
    if (!r->active) return;
    if (c->backend == COMM_BACKEND_NCCL) cudaCheck(cudaStreamWaitEvent(c->compute, r->done, 0));
    r->active = 0;
}

static CommRequest comm_iall_reduce(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    comm_count(c, COLL_ALL_REDUCE, 2LL * n * dtype_size(t));
    if (comm_alone(c, buf, buf, n * dtype_size(t))) return comm_done();
    if (c->backend == COMM_BACKEND_NCCL) {
        comm_nccl_begin(c);
        COMM_NCCL_CHECK(ncclAllReduce(buf, buf, n, nccl_dtype(t), nccl_op(op), c->nccl, c->stream));
        return comm_nccl_end(c, "all_reduce (NCCL)");
    }
    comm_mpi_reduce_device(c, buf, buf, n, n, t, op, 0);
    return comm_done();
}

// send holds world*n elements; in place when recv == send + rank*n, NCCL's convention
static CommRequest comm_ireduce_scatter(Comm *c, void *send, void *recv, size_t n, CommDType t, CommOp op) {
    comm_count(c, COLL_REDUCE_SCATTER, (long long)n * c->world * dtype_size(t));
    if (comm_alone(c, recv, send, n * dtype_size(t))) return comm_done();
    if (c->backend == COMM_BACKEND_NCCL) {
        comm_nccl_begin(c);
        COMM_NCCL_CHECK(ncclReduceScatter(send, recv, n, nccl_dtype(t), nccl_op(op), c->nccl, c->stream));
        return comm_nccl_end(c, "reduce_scatter (NCCL)");
    }
    // MPI: reduce-scatter on the host; the result lands at the front of the staging buffer
    comm_mpi_reduce_device(c, send, recv, n * c->world, n, t, op, 1);
    return comm_done();
}

static CommRequest comm_iall_gather(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    size_t es = dtype_size(t);
    comm_count(c, COLL_ALL_GATHER, (long long)n * c->world * es);
    if (comm_alone(c, recv, send, n * es)) return comm_done();
    if (c->backend == COMM_BACKEND_NCCL) {
        comm_nccl_begin(c);
        COMM_NCCL_CHECK(ncclAllGather(send, recv, n, nccl_dtype(t), c->nccl, c->stream));
        return comm_nccl_end(c, "all_gather (NCCL)");
    }
    char *h = (char *)comm_stage(c, n * c->world * es);
    cudaCheck(cudaStreamSynchronize(c->compute));
    cudaCheck(cudaMemcpy(h + (size_t)c->rank * n * es, send, n * es, cudaMemcpyDeviceToHost));
    wd_coll_begin("all_gather (host-staged)");
    MPI_Allgather(MPI_IN_PLACE, mpi_count(n * es), MPI_BYTE, h, mpi_count(n * es), MPI_BYTE, c->mpi);
    wd_coll_end();
    cudaCheck(cudaMemcpy(recv, h, n * c->world * es, cudaMemcpyHostToDevice));
    return comm_done();
}

#endif

static void comm_all_gather(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    CommRequest r = comm_iall_gather(c, send, recv, n, t); comm_wait(c, &r);
}

// Every rank must agree on a value, such as a config hash; if not, every rank prints the
// same line and exits, so none is left waiting in a collective.
static void comm_check_same(Comm *c, long long value, const char *what) {
    long long mn = value, mx = value;
    wd_coll_begin("all_reduce (a configuration check)");
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_LONG_LONG, MPI_MIN, c->mpi);
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_LONG_LONG, MPI_MAX, c->mpi);
    wd_coll_end();
    if (mn != mx) fatal("ranks disagree on %s (values from %lld to %lld over %d ranks)", what, mn, mx, c->world);
}

// A check that may fail on some ranks only: every rank learns the outcome, and on
// failure the lowest failing rank's message in err. Returns 1 if it passed everywhere.
static int comm_agree(Comm *c, int ok, char *err, size_t errn) {
    int first_bad = ok ? c->world : c->rank;
    wd_coll_begin("all_reduce (agreeing on a check)");
    MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, c->mpi);
    wd_coll_end();
    if (first_bad == c->world) return 1;
    wd_coll_begin("broadcast (a failed check's message)");
    MPI_Bcast(err, (int)errn, MPI_CHAR, first_bad, c->mpi);
    wd_coll_end();
    err[errn - 1] = 0;
    return 0;
}
