// comm/launch.h: where each rank runs: its OpenMP threads, its rank within the node,
// and which ranks share a node, printed at start-up.
//
// MPI's shared-memory split decides the node-local rank: it is what shares memory, and
// so which GPUs a rank sees, under any launcher. The launcher's own word is checked
// against it: SLURM_LOCALID where SLURM_PROCID is this rank, OMPI_COMM_WORLD_LOCAL_RANK
// where OMPI_COMM_WORLD_RANK is; under mpirun inside an allocation the ranks inherit
// SLURM_* variables that do not describe them. A disagreement is one warning, and
// MPI's value is used: a launcher may place ranks as it likes.
#pragma once
#include "comm/comm.h"
#include <omp.h>

// A rank's OpenMP threads, and why: --threads N, else OMP_NUM_THREADS's first level as
// libgomp reads it, else this rank's cores over the ranks on its node.
static int launch_threads(int flag, int local_world, char *why, size_t n) {
    if (flag > 0) { snprintf(why, n, "--threads"); return flag; }
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (v > 0 && v <= 4096 && (*end == 0 || *end == ',')) { snprintf(why, n, "OMP_NUM_THREADS"); return (int)v; }
    }
    int cores = omp_get_num_procs();   // the CPUs of this process's affinity mask
    int t = cores / (local_world > 0 ? local_world : 1);
    if (t < 1) t = 1;
    snprintf(why, n, "%s%d core%s / %d rank%s on the node", env && *env ? "OMP_NUM_THREADS ignored: " : "",
             cores, cores == 1 ? "" : "s", local_world, local_world == 1 ? "" : "s");
    return t;
}

// Collective: checks the node-local rank, and writes which ranks share a node into `out`,
// e.g. "2 nodes: vm0 ranks 0-1 | vm1 ranks 2-3".
static void launch_describe(const Comm *c, char *out, size_t n) {
    // the node: the world rank of its local rank 0
    MPI_Comm local;
    wd_coll_begin("the node table (split, all_reduce, gathers)");
    MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    int leader = c->rank;
    MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local);
    MPI_Comm_free(&local);
    if (getenv("ZEROC_RANKS_PER_NODE") && c->node_size) leader = c->node * c->node_size;   // the test-only nodes
    // the launcher's own idea of it, where the launcher started this very rank
    static const char *VARS[2][2] = {{"SLURM_PROCID", "SLURM_LOCALID"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}};
    int differs = 0;   // 0, or 1 + the index of the first variable that disagrees
    for (int i = 0; i < 2 && !differs; i++) {
        const char *who = getenv(VARS[i][0]), *env_local = getenv(VARS[i][1]);
        if (who && env_local && atoi(who) == c->rank && atoi(env_local) != c->local_rank) differs = 1 + i;
    }
    char host[MPI_MAX_PROCESSOR_NAME] = {0}, mine[64];
    int len;
    MPI_Get_processor_name(host, &len);
    snprintf(mine, sizeof(mine), "%.63s", host);
    int *leaders = NULL, *diff = NULL;
    char *hosts = NULL;
    if (c->rank == 0) {
        leaders = (int *)xmalloc(sizeof(int) * c->world, "node table");
        diff = (int *)xmalloc(sizeof(int) * c->world, "node table");
        hosts = (char *)xmalloc(sizeof(mine) * (size_t)c->world, "node table");
    }
    MPI_Gather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, 0, c->mpi);
    MPI_Gather(&differs, 1, MPI_INT, diff, 1, MPI_INT, 0, c->mpi);
    MPI_Gather(mine, sizeof(mine), MPI_CHAR, hosts, sizeof(mine), MPI_CHAR, 0, c->mpi);
    wd_coll_end();
    if (c->rank != 0) { out[0] = 0; return; }
    int nodes = 0, bad = 0, first_bad = -1;
    for (int r = 0; r < c->world; r++) {
        nodes += leaders[r] == r;
        if (diff[r]) { bad++; if (first_bad < 0) first_bad = r; }
    }
    size_t k = 0;
#define LAUNCH_APPEND(...) (k += (size_t)snprintf(out + (k < n ? k : n), k < n ? n - k : 0, __VA_ARGS__))
    LAUNCH_APPEND("%d node%s:", nodes, nodes == 1 ? "" : "s");
    for (int node = 0; node < c->world; node++) {
        if (leaders[node] != node) continue;
        LAUNCH_APPEND("%s %s ranks", node ? " |" : "", hosts + sizeof(mine) * (size_t)node);
        for (int r = node, sep = ' '; r < c->world; r++, sep = ',') {   // the node's ranks as ranges: 0-3,8-11
            while (r < c->world && leaders[r] != node) r++;
            if (r == c->world) break;
            int e = r;
            while (e + 1 < c->world && leaders[e + 1] == node) e++;
            if (e > r) LAUNCH_APPEND("%c%d-%d", sep, r, e); else LAUNCH_APPEND("%c%d", sep, r);
            r = e;
        }
    }
#undef LAUNCH_APPEND
    if (bad)
        fprintf(stderr, "warning: %d of %d ranks: the launcher's node-local rank (%s, first on rank %d) differs from MPI's "
                "shared-memory split; using MPI's (see comm/launch.h)\n", bad, c->world, VARS[diff[first_bad] - 1][1], first_bad);
    free(leaders); free(diff); free(hosts);
}
