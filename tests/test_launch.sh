#!/usr/bin/env bash
# Launching (comm/launch.h, scripts/launch/): OpenMP threads from --threads, OMP_NUM_THREADS or
# cores / ranks per node, said at start-up; two nodes simulated on this machine (OpenMPI starts
# a daemon per hostfile node through a stand-in for ssh that runs the command here, and the
# ranks talk over TCP): the start-up line names the ranks of each node, MPI's node-local ranks
# agree with OMPI_COMM_WORLD_LOCAL_RANK and SLURM_LOCALID, a disagreeing launcher variable is a
# one-line warning; scripts/launch/mpirun.sh and zeroc.sbatch (with a stand-in srun) run the
# trainer on the two nodes and give the losses of a one-node run.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z3/train_gpt_cpu || exit 1
TR=./build/z3/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --batch 2 --seq 32 --steps 3 --lr 1e-3 --train $TMP/train.bin"

echo "== threads"
line() { grep -m1 "ZeRO stage" "$1" | sed 's/^ *//'; }
OMP_NUM_THREADS=1 $TR $M > "$TMP/t1.out" || exit 1
grep -q "1 rank x 1 thread (OMP_NUM_THREADS)" "$TMP/t1.out"; st=$?; check "OMP_NUM_THREADS=1: $(line "$TMP/t1.out" | cut -d'|' -f2)" $st
OMP_NUM_THREADS=1 $TR $M --threads 2 > "$TMP/t2.out" || exit 1
grep -q "1 rank x 2 threads (--threads)" "$TMP/t2.out"; st=$?; check "--threads 2 wins over OMP_NUM_THREADS=1: $(line "$TMP/t2.out" | cut -d'|' -f2)" $st
env -u OMP_NUM_THREADS $TR $M > "$TMP/t3.out" || exit 1
cores=$(nproc)
grep -q "1 rank x $cores threads\? ($cores cores\? / 1 rank on the node)" "$TMP/t3.out"; st=$?; check "neither: cores / ranks: $(line "$TMP/t3.out" | cut -d'|' -f2)" $st
OMP_NUM_THREADS=lots $TR $M > "$TMP/t4.out" 2>&1 || exit 1
grep -q "(OMP_NUM_THREADS ignored: $cores cores\? / 1 rank on the node)" "$TMP/t4.out"; st=$?; check "OMP_NUM_THREADS=lots is ignored, as libgomp does: $(line "$TMP/t4.out" | cut -d'|' -f2)" $st
OMP_NUM_THREADS=1 $MPIRUN -np 2 -x OMP_NUM_THREADS $TR $M > "$TMP/t5.out" || exit 1
grep -q "2 ranks x 1 thread (OMP_NUM_THREADS)" "$TMP/t5.out"; st=$?; check "under mpirun -x OMP_NUM_THREADS=1: $(line "$TMP/t5.out" | cut -d'|' -f2)" $st

echo "== the ranks' process name"
# the program executes itself again to set its OpenMP wait policy (util/cpu_threads.h); the kernel would
# name it "exe" after /proc/self/exe, so ps, top and pgrep would not find train_gpt_cpu
$MPIRUN -np 2 $TR $M --steps 400 --log "$TMP/names.jsonl" > "$TMP/names.out" 2>&1 &
launcher=$!
if wait_train_steps "$TMP/names.jsonl" 1 $launcher; then
    ranks=$(pgrep -P $launcher -f -- "--log $TMP/names.jsonl" | sort)   # the ranks: mpirun's children
    names=$(for p in $ranks; do cat /proc/$p/comm; done | sort | uniq -c | sed 's/^ *//')
    by_name=$(pgrep -x train_gpt_cpu | sort)
    check "ps, top and pgrep name the 2 ranks train_gpt_cpu, not exe: $names" \
        $([ "$names" = "2 train_gpt_cpu" ] && [ -z "$(comm -23 <(echo "$ranks") <(echo "$by_name"))" ]; echo $?)
else
    check "ps/top/pgrep name the ranks train_gpt_cpu (the run did not start: $(tail -1 "$TMP/names.out"))" 1
fi
kill $launcher 2>/dev/null; wait $launcher 2>/dev/null

echo "== one node"
$MPIRUN -np 4 $TR $M --log "$TMP/one.jsonl" > "$TMP/one.out" 2>&1 || { cat "$TMP/one.out"; exit 1; }
grep -q "1 node: $(hostname | cut -c1-63) ranks 0-3$" "$TMP/one.out"; st=$?; check "4 ranks on one node: $(grep -m1 "node" "$TMP/one.out" | sed 's/^ *//')" $st

echo "== two nodes simulated on this machine"
cat > "$TMP/fakessh" <<'SH'
#!/bin/sh
# stands in for ssh: drops the options and the host name, runs the command here
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
shift
exec sh -c "$*"
SH
chmod +x "$TMP/fakessh"
printf 'nodeA slots=2\nnodeB slots=2\n' > "$TMP/hosts"
# rtc_hwloc_vmhole none: the daemons of the stand-in nodes otherwise write the hwloc topology into a
# "hole" of their address space that can be taken meanwhile (Open MPI 4.1: orted segfaults in
# hwloc_shmem_topology_write, seen here about one run in ten)
SIM="--allow-run-as-root --oversubscribe --mca plm_rsh_agent $TMP/fakessh --mca btl self,tcp --mca rtc_hwloc_vmhole none"
HOSTFILE="$TMP/hosts" ZEROC_BIN=$TR MPIRUN_FLAGS="$SIM" LOGDIR="$TMP/logs" timeout 120 \
    bash scripts/launch/mpirun.sh $M > "$TMP/two.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -qiE "ORTE|orted|daemon" "$TMP/two.out"; then
    echo "  skip two simulated nodes: OpenMPI cannot start a second daemon here: $(grep -m1 -iE "ORTE|orted|daemon" "$TMP/two.out")"
else
    [ $rc -eq 0 ]; check "scripts/launch/mpirun.sh on a 2-node hostfile ran (exit $rc)" $?
    h=$(hostname | cut -c1-63)
    grep -q "2 nodes: $h ranks 0-1 | $h ranks 2-3$" "$TMP/two.out"; st=$?; check "start-up line: $(grep -m1 "nodes:" "$TMP/two.out" | sed 's/^ *//')" $st
    grep -q "4 ranks x 1 thread ([0-9]* cores\? / 2 ranks on the node)" "$TMP/two.out"; st=$?; check "threads per rank from the ranks of its node: $(line "$TMP/two.out" | cut -d'|' -f2)" $st
    ! grep -q "warning" "$TMP/two.out"; check "MPI's node-local ranks agree with OMPI_COMM_WORLD_LOCAL_RANK (no warning)" $?
    log=$(ls "$TMP"/logs/zeroc_*.jsonl 2>/dev/null | head -1)
    [ -n "$log" ] && [ -f "${log%.jsonl}.out" ]; st=$?; check "logs: $(basename "${log%.jsonl}").out and .jsonl in LOGDIR" $st
    compare_losses "$TMP/one.jsonl" "$log" 3 1e-5 "2 nodes x 2 ranks vs 1 node x 4 ranks (ZeRO-3)"
    check "the 2-node run trains like the 1-node run" $?

    # a launcher variable that disagrees with MPI (SLURM_LOCALID set to the global rank)
    cat > "$TMP/wrong_localid" <<'SH'
#!/bin/sh
SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_LOCALID=$OMPI_COMM_WORLD_RANK exec "$@"
SH
    chmod +x "$TMP/wrong_localid"
    timeout 120 mpirun $SIM --hostfile "$TMP/hosts" -np 4 "$TMP/wrong_localid" $TR $M --quiet 1 > "$TMP/warn.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && [ "$(grep -c "^warning" "$TMP/warn.out")" -eq 1 ] &&
        grep -q "warning: 2 of 4 ranks: the launcher's node-local rank (SLURM_LOCALID, first on rank 2) differs" "$TMP/warn.out"
    st=$?; check "SLURM_LOCALID disagreeing on ranks 2-3: one warning line, the run goes on: $(grep -m1 "^warning" "$TMP/warn.out" | cut -c1-110)..." $st

    # zeroc.sbatch with a stand-in srun that starts the tasks on the two simulated nodes and
    # sets SLURM_PROCID / SLURM_LOCALID as srun does
    mkdir -p "$TMP/bin"
    cat > "$TMP/bin/srun" <<SH
#!/bin/bash
while [[ \$1 == --* ]]; do shift; done
exec mpirun $SIM --hostfile "$TMP/hosts" -np \$SLURM_NTASKS -x OMP_NUM_THREADS -x NCCL_DEBUG "$TMP/slurm_task" "\$@"
SH
    cat > "$TMP/slurm_task" <<'SH'
#!/bin/sh
SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK exec "$@"
SH
    chmod +x "$TMP/bin/srun" "$TMP/slurm_task"
    PATH="$TMP/bin:$PATH" SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE="2(x2)" SLURM_NTASKS=4 SLURM_JOB_ID=42 \
        SLURM_JOB_NAME=zt SLURM_CPUS_PER_TASK=1 SLURM_SUBMIT_DIR="$PWD" ZEROC_BIN=$TR LOGDIR="$TMP/slogs" \
        timeout 120 bash scripts/launch/zeroc.sbatch $M > "$TMP/sbatch.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q "2 nodes: $h ranks 0-1 | $h ranks 2-3$" "$TMP/sbatch.out" && ! grep -q "warning" "$TMP/sbatch.out" &&
        grep -q "4 ranks x 1 thread (OMP_NUM_THREADS)" "$TMP/sbatch.out" && [ "$(grep -c '"type":"train"' "$TMP/slogs/zt_42.jsonl")" -eq 3 ]
    st=$?; check "zeroc.sbatch (stand-in srun, 2 nodes x 2 tasks): $(head -1 "$TMP/sbatch.out" | cut -c1-90)...; SLURM_LOCALID agrees, OMP_NUM_THREADS from --cpus-per-task, log in LOGDIR/zt_42.jsonl" $st
    [ $fails -eq 0 ] || { echo "--- two.out"; head -20 "$TMP/two.out"; echo "--- sbatch.out"; head -20 "$TMP/sbatch.out"; }
fi
expect_error "mpirun.sh without HOSTFILE" "HOSTFILE" 1 env -u HOSTFILE bash scripts/launch/mpirun.sh
printf 'a slots=2\nb slots=4\n' > "$TMP/uneven"
expect_error "hostfile with uneven slots" "same slots=" 1 env HOSTFILE="$TMP/uneven" ZEROC_BIN=$TR bash scripts/launch/mpirun.sh
[ $fails -eq 0 ]
