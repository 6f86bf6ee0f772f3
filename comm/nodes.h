// comm/nodes.h: the communicator's collectives within one node and across nodes, for
// ZeRO++ (zero.h). comm_nodes_init (comm/comm.h) found the nodes: consecutive blocks of
// node_size ranks. Two groups follow from them: this rank's node (node_comm), and the
// ranks of every node that have this rank's place in their node (across_comm), so that
// a collective over across_comm moves each byte over the link between nodes exactly once.
//
// The data travels as bytes: ZeRO++ sends quantized blocks (util/quantize.h), which no
// reduction understands, and its secondary parameter copy, which is only gathered. The
// calls are blocking. In the CUDA build the buffers are device memory, staged through
// pinned host memory as the MPI backend stages them (comm/comm.h); NCCL sub-communicators
// (ncclCommSplit) would be the fast path on a real cluster and are not written yet.
#pragma once
#include "comm/comm.h"

static MPI_Comm comm_group(const Comm *c, CommScope scope) {
    return scope == SCOPE_NODE ? c->node_comm : scope == SCOPE_ACROSS ? c->across_comm : c->mpi;
}
static int comm_group_size(const Comm *c, CommScope scope) {
    return scope == SCOPE_NODE ? c->node_size : scope == SCOPE_ACROSS ? c->n_nodes : c->world;
}
static int comm_group_rank(const Comm *c, CommScope scope) {
    return scope == SCOPE_NODE ? c->node_rank : scope == SCOPE_ACROSS ? c->node : c->rank;
}

// Host buffers to MPI: an all-gather (each of the group's ranks gives `bytes`, recv holds them
// in group-rank order) or an all-to-all (send holds `bytes` for each group rank in order, recv
// gets `bytes` from each). Counted as comm/comm.h counts: the buffer of the whole group.
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

// The largest of each value over the ranks, outside the byte accounting, like
// comm_control_or: what a report needs, not the training.
static void comm_control_max(Comm *c, float *v, int n) {
    wd_coll_begin("all_reduce (a report's maximum)");
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_MAX, c->mpi);
    wd_coll_end();
}
