#!/usr/bin/env bash
# Runs every tests/test_*.sh. A test passes with exit 0, is skipped with exit 77
# (it prints why), and fails otherwise. Ends with "N passed, N failed, N skipped".
#
# The CUDA compile checks (make gpu-check cuda-dev-check: no GPU needed, about six minutes of
# two cores) start in the background at nice 19 before the first test, so that they use the
# cycles the other tests leave idle (waiting on mpirun, python, sleeps); the two tests that
# check them, marked "run.sh: last", run after the others and take the build lock
# (build/check.lock), so they wait for it and then find everything built.
cd "$(dirname "$0")/.."
pass=0; fail=0; skip=0; failed=()
only="${TESTS:-}"
selected() { [ -z "$only" ] || [[ ",$only," == *",${1#test_},"* ]]; }
first=(); last=()
for t in tests/test_*.sh; do
    name=$(basename "$t" .sh)
    selected "$name" || continue
    if head -n 12 "$t" | grep -q "run.sh: last"; then last+=("$t"); else first+=("$t"); fi
done
mkdir -p build/logs build/check
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ${#last[@]} -gt 0 ] && { [ -x "$NVCC" ] || command -v "$NVCC" > /dev/null 2>&1; }; then
    # its own session, so that one kill stops the makes and nvccs under it; a new session is also a new
    # scheduling group (Linux's autogroups share the CPU between groups, whatever the nice values inside),
    # so the group itself is set to nice 19
    setsid bash -c 'echo 19 > /proc/self/autogroup 2> /dev/null; exec flock build/check.lock nice -n 19 make -s -j2 gpu-check cuda-dev-check NVCC="$0"' \
        "$NVCC" > build/logs/cuda_background_build.log 2>&1 &
    trap "kill -- -$! 2> /dev/null" EXIT
fi
for t in "${first[@]}" "${last[@]}"; do
    name=$(basename "$t" .sh)
    start=$(date +%s)
    echo "=== $name"
    bash "$t" > "build/logs/$name.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    tail -n 25 "build/logs/$name.log" | sed 's/^/    /'
    if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name (${secs}s)"
    elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name (${secs}s)"
    else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (exit $rc, ${secs}s; full log build/logs/$name.log)"; fi
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
