// comm/nodes.h: collectives within a node and across nodes, for ZeRO++, zero/zeropp.h.
// The nodes are consecutive blocks of node_size ranks, comm_nodes_init. node_comm is this
// rank's node; across_comm holds the ranks with this rank's place in every node, so that
// a collective over it moves each byte over the link between nodes once.
//
// The data travels as bytes, quantized blocks no reduction understands, and the calls
// block. On the GPU the buffers are staged through pinned host memory; NCCL
// sub-communicators, ncclCommSplit, would be the fast path and are not written yet.
#pragma once
#include "comm/comm.h"

static MPI_Comm comm_group(const Comm *c, CommScope scope) {
    MPI_Comm g[] = {c->mpi, c->node_comm, c->across_comm, c->group_comm};
    return g[scope];
}
static int comm_group_size(const Comm *c, CommScope scope) {
    int n[] = {c->world, c->node_size, c->n_nodes, c->group_size};
    return n[scope];
}
static int comm_group_rank(const Comm *c, CommScope scope) {
    int r[] = {c->rank, c->node_rank, c->node, c->group_size ? c->rank % c->group_size : 0};
    return r[scope];
}


// Host buffers to MPI: an all-gather, each rank giving `bytes`, or an all-to-all, `bytes`
// for each rank in group order. Counted as comm/comm.h counts: the whole group's buffer.
static void comm_group_mpi(Comm *c, CommScope scope, CollKind kind, const void *send, void *recv, size_t bytes) {
    MPI_Comm g = comm_group(c, scope);
    int n = comm_group_size(c, scope);
    comm_count_in(c, kind, (long long)bytes * n, scope);
    wd_coll_begin(kind == COLL_ALL_GATHER ? "all_gather (ZeRO++)" : "all_to_all (ZeRO++)");
    if (kind == COLL_ALL_GATHER) {
        int in_place = (const char *)send == (char *)recv + (size_t)comm_group_rank(c, scope) * bytes;
        MPI_Allgather(in_place ? MPI_IN_PLACE : send, mpi_count(bytes), MPI_BYTE, recv, mpi_count(bytes), MPI_BYTE, g);
    } else {
        MPI_Alltoall(send, mpi_count(bytes), MPI_BYTE, recv, mpi_count(bytes), MPI_BYTE, g);
    }
    wd_coll_end();
}

#if !COMM_DEVICE
static void comm_group_exchange(Comm *c, CommScope scope, CollKind kind, const void *send, void *recv, size_t bytes) {
    comm_group_mpi(c, scope, kind, send, recv, bytes);
}
#else
// device buffers: through pinned host memory, after the kernels that wrote send
static void comm_group_exchange(Comm *c, CommScope scope, CollKind kind, const void *send, void *recv, size_t bytes) {
    size_t total = bytes * (size_t)comm_group_size(c, scope), in = kind == COLL_ALL_GATHER ? bytes : total;
    char *h = (char *)comm_stage(c, in + total);
    cudaCheck(cudaStreamSynchronize(c->compute));
    cudaCheck(cudaMemcpy(h, send, in, cudaMemcpyDeviceToHost));
    comm_group_mpi(c, scope, kind, h, h + in, bytes);
    cudaCheck(cudaMemcpy(recv, h + in, total, cudaMemcpyHostToDevice));
}
#endif

static void comm_group_all_gather(Comm *c, CommScope scope, const void *send, void *recv, size_t bytes) {
    comm_group_exchange(c, scope, COLL_ALL_GATHER, send, recv, bytes);
}
static void comm_group_all_to_all(Comm *c, CommScope scope, const void *send, void *recv, size_t bytes) {
    comm_group_exchange(c, scope, COLL_ALL_TO_ALL, send, recv, bytes);
}

// the sum of each value over the ranks, for a report: not counted
static void comm_control_sum(Comm *c, double *v, int n) {
    wd_coll_begin("all_reduce (a report's sum)");
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, c->mpi);
    wd_coll_end();
}
