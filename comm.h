// comm.h: the communicator, the one small interface every collective goes
// through. Both trainers use it; zero.h is written against it.
//
// Backends
//   MPI  (this file): host buffers. Ranks come from mpirun, srun (PMI) or a
//        plain ./binary run (a world of one).
//   NCCL (cuda/comm_nccl.cuh): device buffers, a communication stream and
//        events; ncclUniqueId is broadcast over MPI. Same calls, same meaning.
//
// Semantics follow NCCL so that the two backends are interchangeable:
//   all_reduce(buf, n)            in place, every rank ends with the reduction
//   reduce_scatter(send, recv, n) send holds world*n elements; rank r receives
//                                 the reduction of elements [r*n, (r+1)*n).
//                                 In place when recv == send + rank*n.
//   all_gather(send, recv, n)     recv holds world*n; rank r's n elements land
//                                 at recv + r*n. In place when send == recv + rank*n.
//   broadcast(buf, n, root), barrier()
// and non-blocking forms that return a CommRequest finished by comm_wait().
//
// Byte accounting (per rank, per call, by collective), in the ZeRO paper's
// units: an all-gather or reduce-scatter over a buffer of X bytes counts X;
// an all-reduce counts 2X (it is a reduce-scatter plus an all-gather).
// So plain data parallelism moves 2Ψ per step and ZeRO-3 3Ψ, as in the paper.
#pragma once
#include "common.h"
#include <mpi.h>

typedef enum { DT_F32 = 0, DT_BF16, DT_I32, DT_F64, DT_U8 } CommDType;
typedef enum { OP_SUM = 0, OP_AVG, OP_MAX, OP_MIN } CommOp;
typedef enum { COLL_ALL_REDUCE = 0, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST, N_COLL } CollKind;
static const char *COLL_NAMES[N_COLL] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};

static size_t dtype_size(CommDType t) { return t == DT_F64 ? 8 : t == DT_BF16 ? 2 : t == DT_U8 ? 1 : 4; }

typedef struct {
    int rank, world;
    int local_rank, local_world;   // within the node: selects the GPU
    MPI_Comm mpi;
    long long bytes[N_COLL];       // counted bytes since the last comm_reset_counters
    long long calls[N_COLL];
} Comm;

typedef struct {
    MPI_Request req;
    int active;
    CommOp op;            // OP_AVG is finished (scaled) at wait time
    CommDType dtype;
    void *scale_buf;      // what to scale for OP_AVG
    size_t scale_n;
    void *move_dst;       // in-place reduce-scatter: MPI leaves the result at the front
    size_t move_bytes;
} CommRequest;

static MPI_Datatype mpi_dtype(CommDType t) {
    switch (t) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_I32: return MPI_INT;
    case DT_U8: return MPI_BYTE;
    default: fatal("comm: the MPI backend reduces fp32, fp64 and int32 only (bf16 travels as bytes in gathers)"); return MPI_BYTE;
    }
}
static MPI_Op mpi_op(CommOp op) { return op == OP_MAX ? MPI_MAX : op == OP_MIN ? MPI_MIN : MPI_SUM; }

static void comm_init(Comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof(*c));
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    c->mpi = MPI_COMM_WORLD;
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->world);
    // local rank: ranks sharing a node (shared-memory domain), as mpirun and srun both place them
    MPI_Comm local;
    MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_world);
    MPI_Comm_free(&local);
    g_error_rank = c->rank;
}

static void comm_finalize(Comm *c) { (void)c; MPI_Finalize(); }

static void comm_reset_counters(Comm *c) { memset(c->bytes, 0, sizeof(c->bytes)); memset(c->calls, 0, sizeof(c->calls)); }

static void comm_count(Comm *c, CollKind k, long long bytes) { c->bytes[k] += bytes; c->calls[k]++; }

static void scale_buffer(void *buf, size_t n, CommDType t, double s) {
    if (t == DT_F32) { float *p = (float *)buf; for (size_t i = 0; i < n; i++) p[i] = (float)(p[i] * s); }
    else if (t == DT_F64) { double *p = (double *)buf; for (size_t i = 0; i < n; i++) p[i] *= s; }
    else fatal("comm: OP_AVG needs a floating-point buffer");
}

static void comm_wait(Comm *c, CommRequest *r) {
    if (!r->active) return;
    MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    r->active = 0;
    if (r->move_dst) memmove(r->move_dst, r->scale_buf, r->move_bytes);
    if (r->op == OP_AVG && c->world > 1)
        scale_buffer(r->move_dst ? r->move_dst : r->scale_buf, r->scale_n, r->dtype, 1.0 / c->world);
}

static CommRequest comm_iall_reduce(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    CommRequest r = {0};
    comm_count(c, COLL_ALL_REDUCE, 2LL * n * dtype_size(t));
    r.active = 1; r.op = op; r.dtype = t; r.scale_buf = buf; r.scale_n = n;
    MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
    return r;
}

static CommRequest comm_ireduce_scatter(Comm *c, void *send, void *recv, size_t n, CommDType t, CommOp op) {
    CommRequest r = {0};
    size_t es = dtype_size(t);
    comm_count(c, COLL_REDUCE_SCATTER, (long long)n * c->world * es);
    r.active = 1; r.op = op; r.dtype = t; r.scale_n = n;
    if ((char *)recv == (char *)send + (size_t)c->rank * n * es) {
        // in place (NCCL's convention): MPI writes the result at the front of the buffer
        MPI_Ireduce_scatter_block(MPI_IN_PLACE, send, (int)n, mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
        r.scale_buf = send;
        if (c->rank != 0) { r.move_dst = recv; r.move_bytes = n * es; }
    } else {
        MPI_Ireduce_scatter_block(send, recv, (int)n, mpi_dtype(t), mpi_op(op), c->mpi, &r.req);
        r.scale_buf = recv;
    }
    return r;
}

static CommRequest comm_iall_gather(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    CommRequest r = {0};
    size_t es = dtype_size(t);
    comm_count(c, COLL_ALL_GATHER, (long long)n * c->world * es);
    r.active = 1; r.op = OP_SUM; r.dtype = t;
    // gathers move bytes: bf16 needs no MPI type of its own
    int bytes = (int)(n * es);
    if ((const char *)send == (char *)recv + (size_t)c->rank * n * es)
        MPI_Iallgather(MPI_IN_PLACE, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, c->mpi, &r.req);
    else
        MPI_Iallgather(send, bytes, MPI_BYTE, recv, bytes, MPI_BYTE, c->mpi, &r.req);
    return r;
}

static void comm_all_reduce(Comm *c, void *buf, size_t n, CommDType t, CommOp op) {
    CommRequest r = comm_iall_reduce(c, buf, n, t, op); comm_wait(c, &r);
}
static void comm_reduce_scatter(Comm *c, void *send, void *recv, size_t n, CommDType t, CommOp op) {
    CommRequest r = comm_ireduce_scatter(c, send, recv, n, t, op); comm_wait(c, &r);
}
static void comm_all_gather(Comm *c, const void *send, void *recv, size_t n, CommDType t) {
    CommRequest r = comm_iall_gather(c, send, recv, n, t); comm_wait(c, &r);
}
static void comm_broadcast(Comm *c, void *buf, size_t n, CommDType t, int root) {
    comm_count(c, COLL_BROADCAST, (long long)n * dtype_size(t));
    MPI_Bcast(buf, (int)(n * dtype_size(t)), MPI_BYTE, root, c->mpi);
}
static void comm_barrier(Comm *c) { MPI_Barrier(c->mpi); }

// Every rank must agree on a value (a config hash, a flag). If they do not,
// every rank prints the same one-line error and exits: no rank is left in a
// collective waiting for the others.
static void comm_check_same(Comm *c, long long value, const char *what) {
    long long mn = value, mx = value;
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_LONG_LONG, MPI_MIN, c->mpi);
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_LONG_LONG, MPI_MAX, c->mpi);
    if (mn != mx) fatal("ranks disagree on %s (this rank: %lld; min %lld, max %lld over %d ranks)", what, value, mn, mx, c->world);
}

// One rank failed a check the others passed (a file only it could not read):
// every rank learns it and exits, so none is left waiting.
static void comm_check_ok(Comm *c, int ok, const char *what) {
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, c->mpi);
    if (!all) fatal("%s failed on %s rank", what, ok ? "another" : "this");
}
