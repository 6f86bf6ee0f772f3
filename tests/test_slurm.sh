#!/usr/bin/env bash
# Slurm on the cluster of network namespaces (scripts/cluster.sh --slurm): munged and slurmctld on a
# head node, slurmd on each of 2 nodes under its own host name and address, a slurm.conf written for
# them. sinfo shows the nodes idle; scripts/launch/zeroc.sbatch, unmodified, trains the CPU trainer at
# 2 nodes x 2 ranks through sbatch with both launchers (srun through PMIx, mpirun inside the
# allocation): COMPLETED, its log where the script says, losses and final weights bitwise those of 4
# ranks on one node. A rank killed on the second node ends the job, FAILED, with a line naming the rank
# and the node, within KillWait and a margin. scancel (Slurm's SIGTERM first) leaves a checkpoint,
# and a job submitted with --dependency=afterany waits for it and resumes bitwise. A script that made
# a Slurm cluster and is killed with -9 leaves nothing behind. Nothing here depends on timing: jobs
# are awaited by state, and the cancelled job's ranks are frozen while its successor is sized.
# Skips (77) without root or network namespaces, or without Debian's Slurm and munge.
cd "$(dirname "$0")/.." || exit 1
# shellcheck source-path=SCRIPTDIR/..
source tests/lib.sh
source scripts/cluster.sh
make -s build/z3/train_gpt_cpu || exit 1
TR=$PWD/build/z3/train_gpt_cpu
SBATCH_SCRIPT=$PWD/scripts/launch/zeroc.sbatch
CLUSTER_PREFIX=zcs$$   # unique: test runs in several checkouts may overlap
KILLED=""
trap '[ -n "$KILLED" ] && kill -9 "$KILLED" 2> /dev/null; cluster_down; rm -rf "$TMP"' EXIT
trap 'exit 143' TERM INT HUP
make_shard "$TMP/train.bin" 20000 250
M=(--preset tiny --vocab 250 --batch 2 --seq 32 --lr 1e-3 --lr-schedule constant --persistence-threshold 0 --train "$TMP/train.bin")
export OMP_NUM_THREADS=1
# mpirun inside the allocation refuses root without these (the jobs run as root here)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
losses() { grep '"type":"train"' "$@" | grep -o '"loss":[^,]*'; }

cluster_up 2 2 1gbit slurm > "$TMP/up.out" 2>&1
rc=$?
[ $rc -eq 77 ] && { cat "$TMP/up.out"; exit 77; }
[ $rc -eq 0 ] || { echo "  FAIL the cluster with Slurm did not come up (exit $rc):"; sed 's/^/       /' "$TMP/up.out"; exit 1; }
echo "== $CLUSTER_DESC"
export PATH=$CLUSTER_SLURM_BIN:$PATH
P=$CLUSTER_PREFIX
st=0; [ "$(sinfo -h -N -o '%N %t' | tr '\n' ' ')" = "$P-n0 idle $P-n1 idle " ] || st=1
for i in 0 1; do
    scontrol show node "$P-n$i" | grep -q "NodeAddr=$CLUSTER_SUBNET.$((i + 1)) NodeHostName=$P-n$i " || st=1
done
check "sinfo: $(sinfo -h -N -o '%N %t' | tr '\n' ' ')(each slurmd registered under its host name and address)" $st
srun --mpi=list > "$TMP/mpi.out" 2>&1
grep -q pmix_v4 "$TMP/mpi.out"; st=$?; check "srun --mpi=list: $(grep -v '^MPI' "$TMP/mpi.out" | tr -d '\t' | tr '\n' ' ')" $st

mkdir -p "$TMP/job/logs"
cd "$TMP/job" || exit 1
# the script's #SBATCH defaults are for GPU nodes: these nodes have 2 CPUs and no GPU
SB=(--parsable --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0)
# job_wait JOB SECONDS: until the job leaves the queue's running states; prints its state
job_wait() {
    local i s
    for ((i = 0; i < $2 * 5; i++)); do
        s=$(scontrol show job "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
        case "$s" in PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED) sleep 0.2 ;; *) break ;; esac
    done
    echo "${s:-unknown}"
}
# job_steps JOB N: until the job's JSONL log holds N steps; 1 if the job ends first or 300 s pass
job_steps() {
    local i
    for ((i = 0; i < 1500; i++)); do
        [ "$(grep -c '"type":"train"' "logs/zeroc_$1.jsonl" 2> /dev/null)" -ge "$2" ] 2> /dev/null && return 0
        scontrol show job "$1" | grep -qE 'JobState=(PENDING|CONFIGURING|RUNNING)' || return 1
        sleep 0.2
    done
    return 1
}
# rank_pid NODE VAR=VALUE: the trainer's process on a node whose environment holds VAR=VALUE
rank_pid() {
    local p
    for p in $(ip netns pids "$P-$1"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = train_gpt_cpu ] && tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "$2" && echo "$p"
    done
}
train_pids() { local n; for n in n0 n1; do for p in $(ip netns pids "$P-$n"); do [ "$(cat "/proc/$p/comm" 2> /dev/null)" = train_gpt_cpu ] && echo "$p"; done; done; }
show_job() { scontrol show job "$1" | grep -E 'JobState|ExitCode' | tr -s ' ' | tr '\n' ' '; echo; tail -n 15 "logs/zeroc_$1.out"; }

echo "== zeroc.sbatch at 2 nodes x 2 ranks with both launchers, against 4 ranks on one node"
# shellcheck disable=SC2086  # MPIRUN is a command with its flags (tests/lib.sh)
$MPIRUN -np 4 -x OMP_NUM_THREADS $TR "${M[@]}" --steps 4 --save "$TMP/ref4" --log "$TMP/ref4.jsonl" > "$TMP/ref4.out" 2>&1 || { cat "$TMP/ref4.out"; exit 1; }
for L in srun mpirun; do
    j=$(ZEROC_LAUNCHER=$L ZEROC_BIN=$TR sbatch "${SB[@]}" "$SBATCH_SCRIPT" "${M[@]}" --steps 4 --save "ck_$L")
    s=$(job_wait "$j" 120)
    out=logs/zeroc_$j.out
    [ "$s" = COMPLETED ] && scontrol show job "$j" | grep -q "ExitCode=0:0" && grep -q "via $L;" "$out"
    st=$?; check "ZEROC_LAUNCHER=$L: job $j $s, its output in logs/zeroc_$j.out: $(head -1 "$out" | cut -c1-75)..." $st
    [ $st -eq 0 ] || show_job "$j"
    grep -q "2 nodes: $P-n0 ranks 0-1 | $P-n1 ranks 2-3$" "$out" && ! grep -qi "warning" "$out"
    st=$?; check "  start-up line: $(grep -m1 "nodes:" "$out" | sed 's/^ *//'); no warning" $st
    [ "$(losses "$TMP/ref4.jsonl")" = "$(losses "logs/zeroc_$j.jsonl")" ] && [ "$(losses "logs/zeroc_$j.jsonl" | wc -l)" -eq 4 ] &&
        cmp -s "$TMP/ref4/ckpt_00000004/model.bin" "ck_$L/ckpt_00000004/model.bin"
    st=$?; check "  4 losses (logs/zeroc_$j.jsonl) and the final weights bitwise those of one node: $(losses "logs/zeroc_$j.jsonl" | cut -d: -f2 | tr '\n' ' ')" $st
done

echo "== a rank killed on the second node"
for L in srun mpirun; do
    [ $L = srun ] && var=SLURM_PROCID=3 || var=OMPI_COMM_WORLD_RANK=3
    j=$(ZEROC_LAUNCHER=$L ZEROC_BIN=$TR sbatch "${SB[@]}" "$SBATCH_SCRIPT" "${M[@]}" --steps 1000000)
    out=logs/zeroc_$j.out
    job_steps "$j" 2 || { check "ZEROC_LAUNCHER=$L: job $j trains" 1; show_job "$j"; continue; }
    victim=$(rank_pid n1 "$var")
    [ -n "$victim" ] || { check "ZEROC_LAUNCHER=$L: rank 3 found on $P-n1" 1; scancel "$j"; continue; }
    start=$(date +%s)
    kill -9 "$victim"
    s=$(job_wait "$j" 90)   # KillWait (30 s) bounds it
    secs=$(($(date +%s) - start))
    [ $L = srun ] && line="srun: error: $P-n1: task 3: Killed" || line="process rank 3 with PID $victim on node $P-n1 exited on signal 9"
    [ "$s" = FAILED ] && grep -q "$line" "$out"
    st=$?; check "ZEROC_LAUNCHER=$L: kill -9 of rank 3 on $P-n1: job $s after ${secs} s (at most 90), saying '$(grep -m1 -o "$line.*" "$out")'" $st
    [ $st -eq 0 ] || show_job "$j"
done

echo "== scancel, and a job waiting on it with --dependency=afterany resumes"
a=$(ZEROC_BIN=$TR sbatch "${SB[@]}" "$SBATCH_SCRIPT" "${M[@]}" --steps 1000000 --save ck_c)
job_steps "$a" 3 || { show_job "$a"; exit 1; }
# the ranks frozen, the steps done are known, and the successor is sized past them: Slurm's cancel
# sends SIGCONT before SIGTERM
ranks=$(train_pids)
[ "$(echo "$ranks" | wc -w)" -eq 4 ] || { check "job $a: its 4 ranks found on the nodes (got: $ranks)" 1; exit 1; }
# shellcheck disable=SC2086  # a list of process ids
kill -STOP $ranks
for r in $ranks; do   # stopped, not only signalled: a rank running on the other core may still log a step
    for _ in $(seq 100); do [ "$(sed 's/.*) //' "/proc/$r/stat" | cut -d' ' -f1)" = T ] && break; sleep 0.05; done
done
done_steps=$(grep -c '"type":"train"' "logs/zeroc_$a.jsonl")
S=$((done_steps + 4))
b=$(ZEROC_BIN=$TR sbatch "${SB[@]}" --dependency="afterany:$a" "$SBATCH_SCRIPT" "${M[@]}" --steps $S --save ck_c --resume ck_c)
scontrol show job "$b" | grep -q "JobState=PENDING .*Dependency=afterany:${a}(unfulfilled)"
st=$?; check "job $b waits on job $a: $(scontrol show job "$b" | grep -o 'JobState=[A-Z]* .*Dependency=[^ ]*')" $st
scancel "$a"
sa=$(job_wait "$a" 90)
grep -q "stopped by SIGTERM after step [0-9]* of 1000000: checkpoint saved" "logs/zeroc_$a.out" && [ "$sa" = CANCELLED ]
st=$?; check "scancel: job $a $sa; it says: $(grep -m1 -o 'stopped by SIGTERM.*saved' "logs/zeroc_$a.out")" $st
[ $st -eq 0 ] || show_job "$a"
k=$(sed 's/ckpt_0*//' ck_c/latest 2> /dev/null)
sb=$(job_wait "$b" 120)
[ "$sb" = COMPLETED ] && grep -q "resumed from ck_c/ckpt_0*$k at step $k" "logs/zeroc_$b.out"
st=$?; check "job $b then ran: $sb, $(grep -m1 -o 'resumed from.*' "logs/zeroc_$b.out")" $st
[ $st -eq 0 ] || show_job "$b"
# shellcheck disable=SC2086
$MPIRUN -np 4 -x OMP_NUM_THREADS $TR "${M[@]}" --steps $S --save "$TMP/ref_c" --log "$TMP/ref_c.jsonl" > "$TMP/ref_c.out" 2>&1 || { cat "$TMP/ref_c.out"; exit 1; }
got=$( (losses "logs/zeroc_$a.jsonl"; losses "logs/zeroc_$b.jsonl") )
[ -n "$k" ] && [ "$got" = "$(losses "$TMP/ref_c.jsonl")" ] && [ "$(echo "$got" | wc -l)" -eq $S ] &&
    cmp -s "$TMP/ref_c/ckpt_$(printf %08d $S)/model.bin" "ck_c/ckpt_$(printf %08d $S)/model.bin"
check "steps 1-$k of job $a and $((k + 1))-$S of job $b: the losses and final weights of one uninterrupted run on one node" $?
cd - > /dev/null || exit 1

echo "== down, and a Slurm cluster whose maker is killed with -9"
state=$CLUSTER_STATE
cluster_down
gone() { [ -z "$(_cluster_existing "$1")" ] && [ ! -e "$CLUSTER_STATE_ROOT/$1" ] && ! pgrep -f "$CLUSTER_STATE_ROOT/$1/" > /dev/null && ! grep -q "/run/netns/$1-" /proc/mounts; }
gone "$P"; check "cluster_down: no namespace $P-*, no state, no process of it (munged, slurmctld, slurmd, sshd), no mount" $?
[ ! -e "$state" ] || find "$state" | head
P2=${P}k
CLUSTER_PREFIX=$P2 bash scripts/cluster.sh --slurm -- sleep 600 > "$TMP/killed.out" 2>&1 &
KILLED=$!
for _ in $(seq 300); do grep -q "up:" "$TMP/killed.out" && break; kill -0 $KILLED 2> /dev/null || break; sleep 0.2; done
grep -q "up:" "$TMP/killed.out"; check "scripts/cluster.sh --slurm -- sleep 600 came up" $?
sleeper=$(pgrep -P $KILLED -x sleep)
[ -n "$sleeper" ]; check "  its command runs (pid $sleeper)" $?
kill -9 $KILLED; KILLED=""
for _ in $(seq 100); do gone "$P2" && ! kill -0 "$sleeper" 2> /dev/null && break; sleep 0.2; done
[ -n "$sleeper" ] && gone "$P2" && ! kill -0 "$sleeper" 2> /dev/null
check "after kill -9 of scripts/cluster.sh: its command (sleep 600) ended, and nothing of $P2 is left" $?
[ "$fails" -eq 0 ]
