#!/usr/bin/env bash
# The learner's path (scripts/reading_path.py): README's "Learn ZeRO in this order", followed line by
# line, meets the stage-3 all-gather within 400 lines and has read everything the stage-2
# reduce-scatter depends on within 1,000; README's count of the primitives is zero/backend.h's; and
# zero.h and zero/ keep at most 3 comment words per line of code.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
out=$($PY scripts/reading_path.py --check); st=$?
echo "$out" | sed 's/^/  /'
check "the reading path keeps its budgets" $st
[ $fails -eq 0 ]
