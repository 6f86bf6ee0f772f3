#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS TARGET...: runs build/fuzz/fuzz_TARGET for SECONDS each on its seed corpus
# (tests/fuzz/corpus/TARGET) and a working corpus (build/fuzz/corpus/TARGET, or $FUZZ_WORK/TARGET),
# one line per target, in the order given; a crash, a sanitizer report, a leak or a timeout fails it,
# its input saved in build/fuzz/artifacts/. The targets run FUZZ_JOBS at a time (default: one per
# core; each fuzzer is one process). Exit 0 when every target ran clean. (make fuzz, tests/test_fuzz.sh)
cd "$(dirname "$0")/.."
secs="$1"; shift
work="${FUZZ_WORK:-build/fuzz/corpus}"
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
mkdir -p build/fuzz/artifacts

fuzz_one() {   # TARGET: runs it, writes its line(s) to build/fuzz/TARGET.result, exits as the fuzzer did
    local t=$1 log="build/fuzz/$1.log" rc runs cov
    mkdir -p "$work/$t"
    build/fuzz/fuzz_$t -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/artifacts/$t-" "$work/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1
    rc=$?
    runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$")
    cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "  ok   fuzz_$t: ${runs:-?} inputs in ${secs} s, ${cov:-cov: ?}, corpus $(ls "$work/$t" | wc -l) files"
    else
        echo "  FAIL fuzz_$t (exit $rc; log $log; input in build/fuzz/artifacts/)"
        grep -m5 -E "ERROR|runtime error|SUMMARY|abort" "$log" | sed 's/^/       /'
    fi > "build/fuzz/$t.result"
    return $rc
}

for t in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    fuzz_one "$t" &
done
wait
bad=0
for t in "$@"; do
    cat "build/fuzz/$t.result"
    grep -q "^  ok   " "build/fuzz/$t.result" || bad=1
done
exit $bad
