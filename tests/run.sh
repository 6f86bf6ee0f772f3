#!/usr/bin/env bash
# Runs every tests/test_*.sh. A test passes with exit 0, is skipped with exit 77
# (it prints why), and fails otherwise. Ends with "N passed, N failed, N skipped".
cd "$(dirname "$0")/.."
pass=0; fail=0; skip=0; failed=()
only="${TESTS:-}"
for t in tests/test_*.sh; do
    name=$(basename "$t" .sh)
    if [ -n "$only" ] && [[ ",$only," != *",${name#test_},"* ]]; then continue; fi
    start=$(date +%s)
    echo "=== $name"
    mkdir -p build/logs; bash "$t" > "build/logs/$name.log" 2>&1
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
