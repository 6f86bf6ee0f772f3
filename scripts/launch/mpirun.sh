#!/bin/bash
# scripts/launch/mpirun.sh: zeroc on the nodes of an OpenMPI hostfile, one rank per slot (GPU).
#
#   HOSTFILE=scripts/launch/hostfile.example bash scripts/launch/mpirun.sh --preset gpt2-124m ...
#
# Every node gets the same number of ranks: its slots (see hostfile.example). Each rank takes the
# GPU of its node-local rank (MPI's shared-memory split, comm/launch.h); the start-up line says which
# ranks share a node. Everything after the script name goes to the trainer.
# Environment:
#   HOSTFILE       the OpenMPI hostfile (required)
#   ZEROC_BIN      the trainer (default ./train_gpt; ./train_gpt_cpu trains on CPUs)
#   MPIRUN_FLAGS   more mpirun flags (e.g. --mca btl_tcp_if_include eth0)
#   LOGDIR         where logs go (default logs/): zeroc_<time>.out (rank 0's progress, every rank's
#                  errors) and zeroc_<time>.jsonl unless the flags give --log
#   NCCL_DEBUG, NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_DISABLE, OMP_NUM_THREADS: passed to every rank
set -euo pipefail
[ -n "${HOSTFILE:-}" ] || { echo "mpirun.sh: error: set HOSTFILE to an OpenMPI hostfile (see scripts/launch/hostfile.example)" >&2; exit 1; }
BIN=${ZEROC_BIN:-./train_gpt}
LOGDIR=${LOGDIR:-logs}
[ -f "$HOSTFILE" ] || { echo "mpirun.sh: error: HOSTFILE=$HOSTFILE: no such file" >&2; exit 1; }
[ -x "$BIN" ] || { echo "mpirun.sh: error: $BIN not found: build it first (make train_gpt ZERO=k)" >&2; exit 1; }
# nodes and slots per node from the hostfile (a line without slots= counts one)
read -r NODES PER_NODE < <(awk '!/^[[:space:]]*(#|$)/ {
        n++; s = 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) s = substr($i, 7) + 0
        if (per != "" && s != per) bad = 1; per = s }
    END { print n + 0, (bad ? -1 : per + 0) }' "$HOSTFILE")
[ "$NODES" -gt 0 ] || { echo "mpirun.sh: error: $HOSTFILE names no node" >&2; exit 1; }
[ "$PER_NODE" -gt 0 ] || { echo "mpirun.sh: error: $HOSTFILE: every node needs the same slots= (one rank per GPU)" >&2; exit 1; }
NP=$((NODES * PER_NODE))
mkdir -p "$LOGDIR"
STAMP=$(date +%Y%m%d_%H%M%S)
args=("$@")
case " $* " in *" --log "*) ;; *) args+=(--log "$LOGDIR/zeroc_$STAMP.jsonl") ;; esac
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
pass=(-x NCCL_DEBUG)
for v in NCCL_SOCKET_IFNAME NCCL_IB_HCA NCCL_IB_DISABLE OMP_NUM_THREADS; do [ -n "${!v:-}" ] && pass+=(-x "$v"); done
echo "mpirun.sh: $NODES node(s) x $PER_NODE rank(s) = $NP ranks from $HOSTFILE; output in $LOGDIR/zeroc_$STAMP.out"
# shellcheck disable=SC2086  # MPIRUN_FLAGS is a list of flags
mpirun --hostfile "$HOSTFILE" -np "$NP" --map-by "ppr:$PER_NODE:node" --bind-to none "${pass[@]}" ${MPIRUN_FLAGS:-} \
    "$BIN" "${args[@]}" 2>&1 | tee "$LOGDIR/zeroc_$STAMP.out"
