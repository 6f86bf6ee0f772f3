#!/usr/bin/env bash
# The flash attention kernels (cuda/flash_attention.cuh) checked on the CPU, with no GPU and no
# CUDA toolkit: dev/cuda/flash_emulate.cpp runs the kernels' own code with the instructions they
# use (ldmatrix, mma.sync, shfl, cp.async, __syncthreads) emulated by dev/cuda/flash_emulate.h.
#   1. forward and backward against the double-precision reference, with the tolerances the GPU
#      program dev/cuda/flash_attention.cu uses, on ragged T, GQA, MQA, hd 64 and 128; bitwise the
#      same outputs under other warp schedules and copy timings; no shared-memory race, bad
#      shared access, cp.async outside its input, or deadlock
#   2. one case again under AddressSanitizer: no out-of-bounds global access
#   3. the checks can fail: a copy of the header without the forward's per-tile barrier must
#      report a race; one with two terms of an ldmatrix address swapped must miss the reference
#   4. dev/cuda/flash_model.py: the kernels' bf16 roundings leave the tolerances 4-10x headroom
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
command -v "${CXX:-g++}" >/dev/null || { echo "SKIP: no C++ compiler"; exit 77; }
make -s dev/cuda/bin/flash_emulate dev/cuda/bin/flash_emulate_asan || exit 1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}   # the double reference only; the emulation is one thread

summary() { grep -E "^B=|FAIL|errors, the first|all checks|FAILED" "$1" | sed 's/^/    /'; }

./dev/cuda/bin/flash_emulate > "$TMP/emu.txt" 2>&1; st=$?
summary "$TMP/emu.txt"
check "the kernels' code, emulated: against the double reference, schedule-independent, race-free ($(grep -c ' OK$' "$TMP/emu.txt") checks)" $st

ASAN_OPTIONS=detect_leaks=0 ./dev/cuda/bin/flash_emulate_asan --quick > "$TMP/asan.txt" 2>&1; st=$?
grep -E "ERROR|SUMMARY" "$TMP/asan.txt" | head -5
check "the same under AddressSanitizer (T=300, hd 64, MQA): no out-of-bounds access" $st

# mutant NAME FROM TO: the header with one exact piece of text replaced, built and run (--quick)
mutant() {
    mkdir -p "$TMP/$1/cuda"
    $PY - "$TMP/$1/cuda/flash_attention.cuh" "$2" "$3" <<'PYEOF' || return 2
import sys
path, a, b = sys.argv[1:]
s = open("cuda/flash_attention.cuh").read()
if s.count(a) != 1: sys.exit("the text to replace is not in the header once: %r" % a)
open(path, "w").write(s.replace(a, b))
PYEOF
    ${CXX:-g++} -O1 -std=c++17 -I"$TMP/$1" -I. -w -fno-strict-aliasing -U_FORTIFY_SOURCE -fopenmp \
        dev/cuda/flash_emulate.cpp -o "$TMP/$1/emu" || return 2
    "$TMP/$1/emu" --quick > "$TMP/$1/out.txt" 2>&1
}
mutant no_barrier "        fa_sync();              // everyone's; and every warp is done with tile j-1 (and with sQ)" ""; st=$?
grep -q "no barrier between" "$TMP/no_barrier/out.txt" 2>/dev/null
check "without the forward's per-tile barrier the emulation reports a race (exit $st)" $(( st == 1 ? $? : 1 ))
mutant swapped "fa_ldsm_x4(b, s + (n0 + (lane % 8) + (lane / 16) * 8) * FaTile<HD>::LDS + k0 + ((lane / 8) % 2) * 8);" \
               "fa_ldsm_x4(b, s + (n0 + (lane % 8) + ((lane / 8) % 2) * 8) * FaTile<HD>::LDS + k0 + (lane / 16) * 8);"; st=$?
grep -q "flash forward out .* FAIL" "$TMP/swapped/out.txt" 2>/dev/null
check "with fa_load_b_nt's two halves swapped the forward misses the reference (exit $st)" $(( st == 1 ? $? : 1 ))

$PY dev/cuda/flash_model.py > "$TMP/model.txt" 2>&1; st=$?
tail -n 1 "$TMP/model.txt" | sed 's/^/    /'
check "dev/cuda/flash_model.py: bf16 rounding alone within the tolerances" $st
[ $fails -eq 0 ]
