#!/usr/bin/env bash
# The CPU trainer under AddressSanitizer and UndefinedBehaviorSanitizer: training with
# accumulation, validation, sampling, checkpointing and a resume at another world size and
# stage, at ZeRO stages 0 and 3 on several ranks. Any sanitizer report fails the test.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/asan_z0/train_gpt_cpu build/asan_z3/train_gpt_cpu || exit 1
make_shard "$TMP/train.bin" 30000 256
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
run() {  # run NAME NP STAGE ARGS...
    local name=$1 np=$2 z=$3; shift 3
    $MPIRUN -np "$np" -x ASAN_OPTIONS -x UBSAN_OPTIONS ./build/asan_z$z/train_gpt_cpu --preset tiny --dim 48 --ffn 100 \
        --vocab 256 --train "$TMP/train.bin" --val "$TMP/train.bin" --seq 16 --quiet 1 "$@" > "$TMP/$name.log" 2>&1
    local rc=$? n; n=$(grep -cE "ERROR: AddressSanitizer|runtime error" "$TMP/$name.log")
    [ $rc -eq 0 ] && [ "$n" -eq 0 ]; check "$name (exit $rc, $n sanitizer reports)" $?
    [ "$n" -eq 0 ] || grep -m3 -E "ERROR: AddressSanitizer|runtime error" "$TMP/$name.log"
}
for arch in gpt2 llama; do
    run "stage 3, 3 ranks, $arch" 3 3 --arch $arch --batch 2 --accum 2 --steps 3 --val-every 2 --sample-every 3 --sample-len 8 \
        --persistence-threshold 500 --save "$TMP/ck_$arch"
    run "stage 0, 2 ranks, $arch, resumed from the stage-3 checkpoint" 2 0 --arch $arch --batch 3 --accum 2 --steps 5 --resume "$TMP/ck_$arch"
done
[ $fails -eq 0 ]
