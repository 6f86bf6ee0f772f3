#!/usr/bin/env bash
# The kernels no GPU has run yet that use shuffles, shared memory or atomics, their own code and their
# launchers', run on the CPU with no GPU and no CUDA toolkit (dev/cuda/kernels_emulate.cpp: the headers
# as dev/cuda/emulate_source.py rewrites them, over dev/cuda/emu/'s runtime and dev/cuda/emulate.h):
#   1. ZeRO++'s quantization, the lean norm and AdamW, the residual add fused into the norm, the loss
#      summed on the device and the bias-gradient epilogue's fallback, each against its CPU reference
#      and bitwise the same under three schedules, under UBSan (alignment too)
#   2. one case of each under AddressSanitizer: no out-of-bounds access
#   3. a ZeRO++ message of 37 * 256 + 130 values (dev/cuda/quantize.cu's case before; no shard has that
#      length): util/quantize.h stores its first scale misaligned, which UBSan reports, and
#      zq_quantize_gpu refuses it in one line
#   4. the checks can fail: without blockReduce's barrier before the warps' sums are read the lean norm
#      misses its reference; without the barrier in the loss mean's tree the mean is wrong
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
command -v "${CXX:-g++}" >/dev/null || { echo "SKIP: no C++ compiler"; exit 77; }
make -s dev/cuda/bin/kernels_emulate dev/cuda/bin/kernels_emulate_asan || exit 1
export ASAN_OPTIONS=detect_leaks=0:verbosity=0
noise="ASan doesn't fully support|ASan is ignoring|False positive error|For details see"

summary() { grep -E "^[a-z].*:|FAIL|all checks|FAILED|runtime error|ERROR" "$1" | grep -vE "$noise" | sed 's/^/    /'; }

./dev/cuda/bin/kernels_emulate > "$TMP/emu.txt" 2>&1; st=$?
summary "$TMP/emu.txt"
check "the kernels' code, emulated: against the CPU references, schedule-independent ($(grep -c ' OK$' "$TMP/emu.txt") checks)" $st
[ "$(grep -c "^note: --bias-grad-epilogue: cublasLtMatmul failed (CUBLAS_STATUS_NOT_SUPPORTED) on a BGRADB plan" "$TMP/emu.txt")" -eq 1 ]
check "a failed BGRADB call: one line, then the column-sum kernel" $?

./dev/cuda/bin/kernels_emulate_asan --quick > "$TMP/asan.txt" 2>&1; st=$?
grep -E "ERROR|SUMMARY|FAIL" "$TMP/asan.txt" | head -5
check "one case of each under AddressSanitizer: no out-of-bounds access" $st

./dev/cuda/bin/kernels_emulate --quantize 9602 > "$TMP/old.txt" 2>&1; st=$?
grep -m1 "runtime error" "$TMP/old.txt"
[ $st -ne 0 ] && grep -q "util/quantize.h:[0-9:]* runtime error: store to misaligned address .* for type 'float'" "$TMP/old.txt"
check "n = 37 * 256 + 130: UBSan reports util/quantize.h's misaligned scale store (exit $st)" $?
./dev/cuda/bin/kernels_emulate --misaligned 9602 > "$TMP/mis.txt" 2>&1; st=$?
cat "$TMP/mis.txt"
[ $st -eq 1 ] && [ "$(wc -l < "$TMP/mis.txt")" -eq 1 ] &&
    grep -q "^error: zq_quantize_gpu: a message of 9602 int8 values puts its scales at byte 9602 .*not on a 4-byte boundary" "$TMP/mis.txt"
check "zq_quantize_gpu refuses the misaligned scale offset in one line" $?
./dev/cuda/bin/kernels_emulate --misaligned 9616 > /dev/null 2>&1
check "and takes a shard's length (9616 values)" $?

# the mutants: cuda/common.cuh and cuda/classifier.cuh with one barrier each taken out, rewritten into a
# copy of build/emu, built without sanitizers (faster)
mkdir -p "$TMP/mut/cuda" && cp -r build/emu "$TMP/mut/emu"
$PY - "$TMP/mut/cuda" <<'PYEOF' || exit 1
import sys
cut = {"common": ("    __syncthreads();\n    warp_val = (lane_id < num_warps)", "    warp_val = (lane_id < num_warps)"),
       "classifier": ("        __syncthreads();\n    }\n    if (threadIdx.x == 0) *acc", "    }\n    if (threadIdx.x == 0) *acc")}
for name, (a, b) in cut.items():
    s = open("cuda/%s.cuh" % name).read()
    if s.count(a) != 1: sys.exit("the text to take out is not in cuda/%s.cuh once: %r" % (name, a))
    open("%s/%s.cuh" % (sys.argv[1], name), "w").write(s.replace(a, b))
PYEOF
for n in common classifier; do $PY dev/cuda/emulate_source.py "$TMP/mut/cuda/$n.cuh" "$TMP/mut/emu/cuda/$n.cuh" || exit 1; done
${CXX:-g++} -O0 -std=c++17 -D__CUDACC__ -D__CUDA_ARCH__=900 -I"$TMP/mut/emu" -Idev/cuda/emu -I. -w -fno-strict-aliasing \
    dev/cuda/kernels_emulate.cpp -o "$TMP/mut/emu_mut" || exit 1
"$TMP/mut/emu_mut" --only norm > "$TMP/mut/norm.txt" 2>&1; st=$?
grep -m2 "FAIL" "$TMP/mut/norm.txt" | cut -c1-150
[ $st -eq 1 ] && grep -q "sum of squares .* FAIL" "$TMP/mut/norm.txt"
check "blockReduce without its barrier: the lean norm misses its reference (exit $st)" $?
"$TMP/mut/emu_mut" --only loss > "$TMP/mut/loss.txt" 2>&1; st=$?
grep -m2 "FAIL" "$TMP/mut/loss.txt" | cut -c1-150
[ $st -eq 1 ] && grep -q "first micro-batch .* FAIL" "$TMP/mut/loss.txt"
check "the loss mean's tree without its barrier: the mean is wrong (exit $st)" $?
[ $fails -eq 0 ]
