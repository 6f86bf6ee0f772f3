#!/usr/bin/env bash
# Sampling on the GPU trainer (train_gpt.cu, bf16). Skips (77) without a GPU; scripts/gpu_check.sh runs it.
#   1. test_decode (the same program as the CPU's, built with nvcc): the KV-cache decode step against the
#      full forward, the logits of every position (bf16 tolerance 2e-2, max difference printed), gpt2 and
#      llama, at stage 0 and at ZeRO-3 on 2 ranks sharing the GPU (--comm mpi); the sampler's filters
#   2. --sample 1 from a checkpoint of the CPU trainer: the prompt printed; the same seed twice gives the
#      same samples; ZeRO-3 on 2 ranks prints what stage 0 prints
#   3. information, not checks: greedy text with and without the KV cache on the GPU, and against the
#      CPU trainer's greedy text (bf16 and fp32 logits may break near-ties differently): the length of
#      the common prefix
#   4. speed: GPT-2 124M (random weights), 4 samples x 256 tokens, KV cache vs a full forward per token
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "GPU"; then
    echo "SKIP: no GPU found"
    exit 77
fi
[ -f data/gpt2_tokenizer.bin ] || { echo "SKIP: no data/gpt2_tokenizer.bin (carry data/ to the GPU machine)"; exit 77; }
source tests/lib.sh
TO="timeout -k 5 ${GPU_RUN_TIMEOUT:-60}"
make -s -j"$(nproc 2>/dev/null || echo 2)" gpu-all build/z0/train_gpt_cpu ${GPU_MAKE_FLAGS:-} || { echo "FAIL: build"; exit 1; }
G0=./build/gpu_z0_o0/train_gpt G3=./build/gpu_z3_o0/train_gpt CPU=./build/z0/train_gpt_cpu
PROMPT="The quick brown fox"
make_shard "$TMP/train.bin" 20000 50257

same() {   # NAME A B: identical, non-empty files
    if [ -s "$2" ] && cmp -s "$2" "$3"; then echo "  ok   $1"
    else echo "  FAIL $1"; diff "$2" "$3" | head -6 | sed 's/^/       /'; fails=$((fails+1)); fi
}
common_prefix() {  # A B: characters the two texts share from the start, of how many
    python3 - "$1" "$2" <<'PYEOF'
import os, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
n = len(os.path.commonprefix([a, b]))
print(f"{n} of {max(len(a), len(b))} bytes in common" + (" (identical)" if a == b else ""))
PYEOF
}

for arch in gpt2 llama; do
    M="--arch $arch --preset tiny"
    echo "== $arch: a CPU checkpoint after 3 steps"
    $CPU $M --train "$TMP/train.bin" --batch 2 --seq 32 --steps 3 --lr 1e-2 --quiet 1 --save "$TMP/ck_$arch" > /dev/null || exit 1
    INIT="$TMP/ck_$arch/ckpt_00000003/model.bin"

    echo "== $arch: 1. the KV cache against the full forward on the GPU"
    $TO ./build/gpu_test/test_decode $M --init "$INIT" --batch 3 --seq 40 --quiet 1 > "$TMP/dec.txt" 2>&1
    rc=$?; grep -E "KV-cache|FAIL|error" "$TMP/dec.txt" | sed 's/^/       /'
    check "$arch: decode = full forward (stage 0, bf16 tolerance)" $rc
    if [ $arch = gpt2 ]; then check "sampler filters (the GPU build of test_decode)" $(grep -c "FAIL" "$TMP/dec.txt"); fi
    if command -v mpirun >/dev/null 2>&1; then
        $TO $MPIRUN -np 2 ./build/gpu_test_z3/test_decode $M --init "$INIT" --batch 2 --seq 24 --quiet 1 --comm mpi \
            --persistence-threshold 0 > "$TMP/dec3.txt" 2>&1
        rc=$?; grep -E "KV-cache|FAIL|error" "$TMP/dec3.txt" | sed 's/^/       /'
        check "$arch: decode = full forward (ZeRO-3, 2 ranks on one GPU, every unit gathered)" $rc
    fi

    echo "== $arch: 2. --sample 1 on the GPU"
    S="$M --sample 1 --resume $TMP/ck_$arch --quiet 1 --sample-len 32"
    R="--num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 --seed 7"
    $TO $G0 $S --prompt "$PROMPT" $R > "$TMP/a_$arch.txt" 2> "$TMP/a_$arch.err" || tail -n 5 "$TMP/a_$arch.err"
    $TO $G0 $S --prompt "$PROMPT" $R > "$TMP/b_$arch.txt" 2>&1
    sed -n 1,2p "$TMP/a_$arch.txt" | cut -c1-120 | sed 's/^/       /'
    grep -q "^$PROMPT" "$TMP/a_$arch.txt"
    check "$arch: the prompt, then its continuation" $?
    same "$arch: seed 7 twice: the same 3 samples" "$TMP/a_$arch.txt" "$TMP/b_$arch.txt"
    if command -v mpirun >/dev/null 2>&1; then
        # the samples (stdout) only: mpirun's launcher may warn on stderr (a PMIx plugin of the machine's own)
        $TO $MPIRUN -np 2 $G3 $S --prompt "$PROMPT" $R --comm mpi --persistence-threshold 0 > "$TMP/z3_$arch.txt" 2> "$TMP/z3_$arch.err" ||
            tail -n 5 "$TMP/z3_$arch.err"
        same "$arch: ZeRO-3 x 2 ranks (--comm mpi) = stage 0 x 1 rank" "$TMP/a_$arch.txt" "$TMP/z3_$arch.txt"
    fi

    echo "== $arch: 3. greedy text (information)"
    $TO $G0 $S --prompt "$PROMPT" --temperature 0 > "$TMP/gk_$arch.txt" 2>&1
    $TO $G0 $S --prompt "$PROMPT" --temperature 0 --kv-cache 0 > "$TMP/gf_$arch.txt" 2>&1
    $CPU $S --prompt "$PROMPT" --temperature 0 --threads 4 > "$TMP/gc_$arch.txt" 2>&1
    echo "       GPU, KV cache vs full forward: $(common_prefix "$TMP/gk_$arch.txt" "$TMP/gf_$arch.txt")"
    echo "       GPU vs CPU (both with the KV cache): $(common_prefix "$TMP/gk_$arch.txt" "$TMP/gc_$arch.txt")"
done

echo "== 4. speed: GPT-2 124M (random weights), 4 samples x 256 tokens after a 5-token context"
$TO $G0 --preset gpt2-124m --train "$TMP/train.bin" --steps 0 --save "$TMP/ck124" --quiet 1 > "$TMP/ck124.out" 2>&1 || { tail -5 "$TMP/ck124.out"; }
for kv in 1 0; do
    $TO $G0 --preset gpt2-124m --sample 1 --resume "$TMP/ck124" --prompt "$PROMPT" --num-samples 4 --sample-len 256 \
        --temperature 0 --kv-cache $kv > "$TMP/speed$kv.txt" 2>&1
    rc=$?
    grep -E "^sampled|KV cache:" "$TMP/speed$kv.txt" | sed 's/^/       /'
    check "gpt2-124m --kv-cache $kv runs" $rc
done
echo "$fails check(s) failed"
[ $fails -eq 0 ]
