#!/usr/bin/env bash
# The --save directory at start-up: created with its parents before any training, a
# directory that cannot be written refused at once, and a lock file: a second run saving
# into the same directory refuses to start, naming the first run's pid and host; the lock
# of a dead process on this host (a zombie too) is taken over with a note, by one run only
# when two find it at once; so is one whose pid runs but whose kernel lock is free (issue 33).
cd "$(dirname "$0")/.."
source tests/lib.sh
first=""
trap '[ -n "$first" ] && kill -9 $first 2> /dev/null; rm -rf "$TMP"' EXIT
make -s build/z0/train_gpt_cpu || exit 1
B=./build/z0/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --lr-schedule constant --threads 1"

echo "== created and test-written at start-up"
$B $M --quiet 1 --steps 1 --save "$TMP/a/b/c/run" > /dev/null && [ -f "$TMP/a/b/c/run/ckpt_00000001/manifest.json" ] && [ ! -e "$TMP/a/b/c/run/.lock" ]
check "missing parents are created; the lock is gone after the run" $?
touch "$TMP/file"
expect_error "a parent that is a file: refused before training" "--save: .*file: exists and is not a directory" 1 $B $M --steps 1 --save "$TMP/file/run"
! grep -q "step " "$TMP/err.txt"; check "... and before any step" $?
mkdir -p "$TMP/full"
expect_error "a directory that refuses writes (injected ENOSPC)" "--save: cannot write there: .*write_test.*No space left on device" 1 \
    env ZEROC_FAIL_WRITE=.write_test:last $B $M --steps 1 --save "$TMP/full"

echo "== one run per directory"
$B $M --quiet 1 --steps 1000000 --save "$TMP/shared" --log "$TMP/first.jsonl" > /dev/null 2>&1 &
first=$!
wait_train_steps "$TMP/first.jsonl" 1 $first
expect_error "a second run saving into the same directory" "--save: .*shared is in use by another run \\(pid $first on host $(hostname)" 1 \
    $B $M --steps 1 --save "$TMP/shared"
kill -9 $first; wait $first 2> /dev/null
[ -f "$TMP/shared/.lock" ]; check "kill -9 leaves the lock behind" $?
$B $M --quiet 1 --steps 1 --save "$TMP/shared" > "$TMP/takeover.out" 2>&1; rc=$?
sed 's/^/       /' "$TMP/takeover.out"
[ $rc -eq 0 ] && grep -q "note: .*took over the lock of pid $first" "$TMP/takeover.out"; check "a dead process's lock is taken over with a note" $?
echo "== a stale lock found by two runs at once: exactly one takes it over"
# run A stops itself (ZEROC_TEST_STOP) once it has found the lock stale and decided to take it over;
# run B comes then. 99999999 is above any pid_max (2^22): no process has it.
mkdir -p "$TMP/race" && echo "99999999 $(hostname)" > "$TMP/race/.lock"
ZEROC_TEST_STOP=lock-takeover $B $M --quiet 1 --steps 1 --save "$TMP/race" > "$TMP/race_a.out" 2>&1 &
first=$!
wait_state $first T; check "run A stopped at its takeover" $?
$B $M --quiet 1 --steps 1 --save "$TMP/race" > "$TMP/race_b.out" 2>&1; rb=$?
kill -CONT $first; wait $first; ra=$?; first=""
sed 's/^/       B: /' "$TMP/race_b.out" | grep -E "error|note"
[ $ra -eq 0 ] && [ $rb -eq 1 ] && grep -q "error: --save: .*race is in use by another run" "$TMP/race_b.out"
check "A takes the lock over and trains (exit $ra); B is refused as in use (exit $rb)" $?

echo "== a lock whose owner is a zombie (exited, not yet reaped: mpirun's rank 0 just after the job) is taken over"
# a parent that never collects its child's exit status: the child stays a zombie while the parent lives
$PY -c 'import os, sys, time
pid = os.fork()
if pid == 0: os._exit(0)
open(sys.argv[1], "w").write(str(pid)); time.sleep(60)' "$TMP/zombie.pid" &
reaper=$!
for i in $(seq 600); do [ -s "$TMP/zombie.pid" ] && break; sleep 0.1; done
z=$(cat "$TMP/zombie.pid")
wait_state $z Z; check "pid $z is a zombie" $?
mkdir -p "$TMP/zombie" && echo "$z $(hostname)" > "$TMP/zombie/.lock"
$B $M --quiet 1 --steps 1 --save "$TMP/zombie" > "$TMP/zombie.out" 2>&1; rc=$?
kill $reaper 2> /dev/null
sed 's/^/       /' "$TMP/zombie.out"
[ $rc -eq 0 ] && grep -q "note: .*took over the lock of pid $z" "$TMP/zombie.out"; check "the zombie's lock is taken over with a note" $?
echo "== the kernel lock is the truth: a lock naming a live pid whose flock is free is taken (a restarted container reuses pids)"
mkdir -p "$TMP/reused"
bash -c 'echo "$$ $(hostname)" > "$0/.lock"; exec "$@"' "$TMP/reused" $B $M --quiet 1 --steps 1 --save "$TMP/reused" > "$TMP/reused.out" 2>&1; rc=$?
sed 's/^/       /' "$TMP/reused.out"
[ $rc -eq 0 ] && grep -q "note: .*took over the lock of pid [0-9]*.*whose kernel lock is free" "$TMP/reused.out"
check "a lock naming the run's own pid (exec after writing it): taken over with a note" $?
echo "1 $(hostname)" > "$TMP/reused/.lock"
$B $M --quiet 1 --steps 2 --save "$TMP/reused" --resume "$TMP/reused" > "$TMP/reused1.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "note: .*took over the lock of pid 1 " "$TMP/reused1.out"
check "a lock naming pid 1 (an entrypoint trainer before the restart): taken over, the run resumes" $?
mkdir -p "$TMP/remote" && echo "4242 some-other-host" > "$TMP/remote/.lock"
expect_error "a lock held on another host" "in use by another run \\(pid 4242 on host some-other-host.*remove the lock file" 1 \
    $B $M --steps 1 --save "$TMP/remote"
[ $fails -eq 0 ]
