#!/usr/bin/env bash
# The watchdog (--timeout S): one rank of 3 is stopped (SIGSTOP) mid-run; the others see no
# progress in their collective for S seconds, print one line naming the rank and the
# collective it waits on, and the job ends (MPI_Abort, exit 124) instead of hanging. This is
# the one test that measures time: S = 5 s, and the job must end within S + 55 s of the stop.
# A healthy run with the same small timeout is not disturbed. The watchdog watches every
# collective from before MPI_Init to exit: a rank stopped before MPI_Init returns, during
# start-up or shutdown (at a point a test-only hook picks, not after a sleep) ends the job
# the same way, and no rank of the job is left behind (one node: mpirun starts no orted here;
# test_cluster ends jobs across nodes).
cd "$(dirname "$0")/.."
source tests/lib.sh
run=""
trap '[ -n "$run" ] && { pkill -CONT -P $run; kill -9 $run; pkill -9 -P $run; } 2> /dev/null; rm -rf "$TMP"' EXIT
make -s build/z3/train_gpt_cpu || exit 1
B=./build/z3/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --lr-schedule constant --threads 1 --quiet 1 --persistence-threshold 0"

echo "== a healthy run with --timeout 5 completes"
$MPIRUN -np 3 $B $M --steps 20 --timeout 5 > "$TMP/ok.out" 2>&1; check "20 steps at 3 ranks, no watchdog (exit $?)" $?

echo "== a stopped rank: the job ends within the timeout"
$MPIRUN -np 3 $B $M --steps 1000000 --timeout 5 --log "$TMP/log.jsonl" > "$TMP/out.txt" 2>&1 &
run=$!
wait_train_steps "$TMP/log.jsonl" 3 $run
victim=$(pgrep -P $run | sed -n 2p)
kill -STOP $victim
t0=$(date +%s)
for i in $(seq 600); do kill -0 $run 2> /dev/null || break; sleep 0.1; done
wait $run; rc=$?
dt=$(( $(date +%s) - t0 ))
grep "watchdog" "$TMP/out.txt" | sed 's/^/       /'
[ $rc -ne 0 ] && [ $dt -le 60 ]; check "the job ended ${dt} s after the stop (timeout 5 s), exit status $rc" $?
grep -qE "error: watchdog: rank [0-9] made no progress for [0-9]+ s \(--timeout 5\): it waits in (all_reduce|reduce_scatter|all_gather|broadcast|barrier)" "$TMP/out.txt"
check "a line naming the rank and the collective it waits on" $?
[ $rc -eq 124 ]; check "exit status 124 (MPI_Abort with the watchdog's status)" $?
for i in $(seq 300); do kill -0 $victim 2> /dev/null || break; sleep 0.1; done
! kill -0 $victim 2> /dev/null; check "the stopped rank is gone too" $?
run=""

# stopped RANK at POINT (ZEROC_TEST_STOP, a test-only hook that stops that rank with SIGSTOP exactly there):
# the others wait for it in a collective; their watchdog must end the job with a line naming the phase
stopped_at() {  # stopped_at POINT RANK WAIT-PATTERN PHASE-PATTERN [TIMEOUT]
    local s=${5:-3}
    timeout -s KILL 60 $MPIRUN -np 3 -x ZEROC_TEST_STOP="$1:$2" $B $M --steps 3 --timeout $s > "$TMP/$1.out" 2>&1; rc=$?
    grep "watchdog" "$TMP/$1.out" | sort -u | head -1 | sed 's/^/       /'
    [ $rc -eq 124 ] && grep -qE "error: watchdog: rank [0-9] made no progress for [0-9]+ s \(--timeout $s\): it waits in $3, in $4" "$TMP/$1.out"
    st=$?; check "rank $2 stopped at $1: the watchdog ends the job, exit 124 (got $rc; 137: killed after 60 s, no watchdog)" $st
    [ $st -eq 0 ] || sed 's/^/       | /' "$TMP/$1.out" | head -40
    # no rank of the job may outlive it
    local left=""
    for _ in $(seq 50); do left=$(pgrep -f "$TMP/train.bin"); [ -z "$left" ] && break; sleep 0.1; done
    [ -n "$left" ] && { kill -CONT $left; kill -9 $left; } 2> /dev/null
    [ -z "$left" ]
    check "rank $2 stopped at $1: no rank of the job left${left:+ (found: $left)}" $?
}
echo "== a rank stopped before MPI_Init returns, during start-up (before its first collective), during shutdown (after the last step) and before MPI_Finalize"
# 10 s, not 3: once, on a heavily loaded machine, mpirun did not end a 3 s run (cause not found; 10 of 10
# runs at 3 s ended in 4-5 s otherwise); a failure prints the run's output
stopped_at mpi-init 1 "MPI_Init \(every rank joining the job\)" "start-up; .*: ending this rank, and mpirun the job" 10
stopped_at start-up 1 "MPI_Comm_split_type.*" "start-up"
stopped_at shutdown 2 ".*" "the end-of-run reports of step 3"
stopped_at finalize 1 "MPI_Finalize" "shutdown"
[ $fails -eq 0 ]
