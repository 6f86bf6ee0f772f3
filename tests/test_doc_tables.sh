#!/usr/bin/env bash
# The measured tables of the docs (docs/zero.md's memory, communication and GPT-2 124M estimate;
# docs/memory.md's demo model) are what scripts/doc_tables.py's runs print today, and
# docs/benchmarks.md's ZeRO++ convergence is what bench/zeropp_convergence.txt records: a committed
# table that differs fails, naming the table (python3 scripts/doc_tables.py --write updates them).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
make -s zero-bins
out=$($PY scripts/doc_tables.py --check); st=$?
echo "$out" | sed 's/^/  /'
check "the docs' measured tables equal what the runs print" $st
[ $fails -eq 0 ]
