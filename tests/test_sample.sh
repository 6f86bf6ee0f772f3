#!/usr/bin/env bash
# Sampling (train/sample.h, --sample 1, --sample-every) on the CPU trainer, both architectures:
#   - the KV-cache decode step against the full forward: the logits of every position (test_decode,
#     max difference printed), at stage 0 and at ZeRO-3 on 2 ranks; the sampler's temperature, top-k and
#     top-p against known distributions
#   - greedy (temperature 0) text identical with and without the KV cache (--kv-cache 0: a full
#     forward per token), in --sample 1 and in the training loop's samples
#   - deterministic for a seed (two runs equal, several samples), another seed differs
#   - ZeRO-3 on 2 ranks (every unit gathered) prints what stage 0 on 1 rank prints
#   - from a --resume checkpoint, its model.bin (--init) and its Hugging Face export (--init
#     X.safetensors): the same text
#   - top-k 1 and top-p 1e-6 are greedy; the prompt is printed, then its continuation
#   - bad flags and sizes: one-line errors (every rank under mpirun); flags that do nothing: a note
cd "$(dirname "$0")/.."
source tests/lib.sh
TOK=data/gpt2_tokenizer.bin
[ -f "$TOK" ] || { echo "SKIP: no $TOK (scripts/prepare_data.sh writes it)"; exit 77; }
make -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu build/z0/test_decode_cpu build/z3/test_decode_cpu build/export_model || exit 1
T0=./build/z0/train_gpt_cpu T3=./build/z3/train_gpt_cpu
export OMP_NUM_THREADS=1
make_shard "$TMP/train.bin" 20000 50257
PROMPT="The quick brown fox"

# same NAME A B: the two files are identical (and not empty)
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then echo "  ok   $1"
    else echo "  FAIL $1"; diff "$2" "$3" | head -6 | sed 's/^/       /'; fails=$((fails+1)); fi
}

for arch in gpt2 llama; do
    M="--arch $arch --preset tiny --threads 1"
    echo "== $arch: a checkpoint after 3 steps (stage 0), and its Hugging Face export"
    $T0 $M --train "$TMP/train.bin" --batch 2 --seq 32 --steps 3 --lr 1e-2 --quiet 1 --save "$TMP/ck_$arch" > /dev/null || exit 1
    ./build/export_model "$TMP/ck_$arch" "$TMP/hf_$arch" > /dev/null || exit 1
    SA="$M --sample 1 --resume $TMP/ck_$arch --quiet 1 --sample-len 24" S="$T0 $SA"

    echo "== $arch: the KV cache against the full forward, every position's logits"
    ./build/z0/test_decode_cpu $M --init "$TMP/ck_$arch/ckpt_00000003/model.bin" --batch 3 --seq 40 --quiet 1 > "$TMP/dec.txt"
    rc=$?; sed -n 2p "$TMP/dec.txt" | sed 's/^/       /'
    check "$arch: decode = full forward (stage 0, 3 sequences x 40 positions)" $rc
    $MPIRUN -np 2 ./build/z3/test_decode_cpu $M --init "$TMP/ck_$arch/ckpt_00000003/model.bin" --batch 2 --seq 24 --quiet 1 \
        --persistence-threshold 0 > "$TMP/dec3.txt"
    rc=$?; sed -n 2p "$TMP/dec3.txt" | sed 's/^/       /'
    check "$arch: decode = full forward (ZeRO-3, 2 ranks, every unit gathered)" $rc
    if [ $arch = gpt2 ]; then grep -E "^  (temperature|top)" "$TMP/dec.txt"; check "sampler: temperature, top-k, top-p frequencies" $(grep -c FAIL "$TMP/dec.txt"); fi

    echo "== $arch: greedy text with and without the KV cache"
    $S --prompt "$PROMPT" --temperature 0 > "$TMP/g_kv_$arch.txt"
    $S --prompt "$PROMPT" --temperature 0 --kv-cache 0 > "$TMP/g_full_$arch.txt"
    head -1 "$TMP/g_kv_$arch.txt" | cut -c1-120 | sed 's/^/       /'
    same "$arch: temperature 0, KV cache = full forward per token" "$TMP/g_kv_$arch.txt" "$TMP/g_full_$arch.txt"
    head -1 "$TMP/g_kv_$arch.txt" | grep -q "^$PROMPT."
    check "$arch: the prompt, then its continuation" $?
    $S --prompt "$PROMPT" --top-k 1 --seed 5 > "$TMP/k1_$arch.txt"
    same "$arch: top-k 1 = greedy" "$TMP/g_kv_$arch.txt" "$TMP/k1_$arch.txt"
    $S --prompt "$PROMPT" --top-p 1e-6 --seed 5 > "$TMP/p0_$arch.txt"
    same "$arch: top-p 1e-6 = greedy" "$TMP/g_kv_$arch.txt" "$TMP/p0_$arch.txt"

    echo "== $arch: sampling is deterministic for a seed"
    $S --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 --seed 7 > "$TMP/s7a_$arch.txt"
    $S --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 --seed 7 > "$TMP/s7b_$arch.txt"
    $S --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 --seed 8 > "$TMP/s8_$arch.txt"
    sed -n 1,2p "$TMP/s7a_$arch.txt" | cut -c1-120 | sed 's/^/       /'
    same "$arch: seed 7 twice: the same 3 samples" "$TMP/s7a_$arch.txt" "$TMP/s7b_$arch.txt"
    ! cmp -s "$TMP/s7a_$arch.txt" "$TMP/s8_$arch.txt"
    check "$arch: seed 8 differs from seed 7" $?
    [ "$(grep -c '^--- sample [123]/3$' "$TMP/s7a_$arch.txt")" = 3 ] && [ "$(sort -u "$TMP/s7a_$arch.txt" | grep -vc '^---')" -ge 2 ]
    check "$arch: 3 samples, not all equal" $?

    echo "== $arch: ZeRO-3 on 2 ranks, and other sources of the same weights"
    $MPIRUN -np 2 $T3 $SA --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 --seed 7 \
        --persistence-threshold 0 > "$TMP/z3_$arch.txt"
    same "$arch: ZeRO-3 x 2 ranks = stage 0 x 1 rank (seed 7, 3 samples)" "$TMP/s7a_$arch.txt" "$TMP/z3_$arch.txt"
    $T0 $M --sample 1 --quiet 1 --sample-len 24 --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 --top-p 0.95 \
        --seed 7 --init "$TMP/ck_$arch/ckpt_00000003/model.bin" > "$TMP/bin_$arch.txt"
    same "$arch: --init model.bin = --resume" "$TMP/s7a_$arch.txt" "$TMP/bin_$arch.txt"
    $T0 --sample 1 --threads 1 --quiet 1 --sample-len 24 --prompt "$PROMPT" --num-samples 3 --temperature 1.2 --top-k 200 \
        --top-p 0.95 --seed 7 --init "$TMP/hf_$arch/model.safetensors" > "$TMP/hf_$arch.txt"
    same "$arch: --init model.safetensors (its config.json sets the model) = --resume" "$TMP/s7a_$arch.txt" "$TMP/hf_$arch.txt"
done

echo "== the training loop's samples: the same code"
for kv in 1 0; do
    $T0 --preset tiny --threads 1 --train "$TMP/train.bin" --batch 2 --seq 32 --steps 2 --sample-every 2 --sample-len 16 \
        --prompt "$PROMPT" --temperature 0 --kv-cache $kv > "$TMP/train_kv$kv.txt" 2>&1 || { echo "  FAIL training with --kv-cache $kv"; fails=$((fails+1)); }
    grep '^sample: ' "$TMP/train_kv$kv.txt" > "$TMP/train_s$kv.txt"
done
sed 's/^/       /' "$TMP/train_s1.txt" | cut -c1-120
same "--sample-every: greedy samples with and without the KV cache" "$TMP/train_s1.txt" "$TMP/train_s0.txt"
grep -q "^sample: $PROMPT" "$TMP/train_s1.txt"
check "--sample-every: the prompt, then its continuation" $?
$T0 --preset tiny --threads 1 --train "$TMP/train.bin" --batch 2 --seq 32 --steps 2 --sample-every 2 --sample-len 8 --num-samples 2 \
    --quiet 0 > "$TMP/train_n2.txt" 2>&1
[ "$(grep -cE '^sample [12]/2: ' "$TMP/train_n2.txt")" = 2 ]
check "--sample-every with --num-samples 2: two labelled samples" $?

echo "== bad flags and sizes: one-line errors; flags that do nothing: a note"
CK="$TMP/ck_gpt2"
B="--preset tiny --threads 1 --quiet 1"
expect_error "--sample 1 without weights" "--sample: 1 needs weights to sample from" 1 $T0 $B --sample 1
expect_error "--sample 1 without weights, 2 ranks" "--sample: 1 needs weights" 2 $MPIRUN -np 2 $T3 $B --sample 1
expect_error "--temperature -1" "--temperature: expected a number >= 0, got '-1'" 1 $T0 $B --sample 1 --resume "$CK" --temperature -1
expect_error "--top-p 0" "--top-p: expected a number in \(0, 1\], got '0'" 1 $T0 $B --sample 1 --resume "$CK" --top-p 0
expect_error "--top-p 1.5" "--top-p: expected a number in \(0, 1\]" 1 $T0 $B --sample 1 --resume "$CK" --top-p 1.5
expect_error "--top-k -1" "--top-k: expected an integer" 1 $T0 $B --sample 1 --resume "$CK" --top-k -1
expect_error "--num-samples 0" "--num-samples: expected an integer in \[1, 4096\]" 1 $T0 $B --sample 1 --resume "$CK" --num-samples 0
expect_error "--kv-cache 2" "--kv-cache: expected an integer in \[0, 1\]" 1 $T0 $B --sample 1 --resume "$CK" --kv-cache 2
expect_error "--sample 2" "--sample: expected an integer in \[0, 1\]" 1 $T0 $B --sample 2 --resume "$CK"
expect_error "--sample-len past --max-seq" "--sample-len 61 after a context of 5 tokens .* needs 65 positions; the model has 64" 1 \
    $T0 $B --sample 1 --resume "$CK" --prompt "$PROMPT" --sample-len 61
expect_error "--sample-len past --max-seq, 2 ranks" "needs 65 positions; the model has 64" 2 \
    $MPIRUN -np 2 $T3 $B --sample 1 --resume "$CK" --prompt "$PROMPT" --sample-len 61
# the default --sample-len (64) after a prompt on a model of 64 positions (the README's sampling line on
# the demo's model): a note, once, and the tokens that fit
$MPIRUN -np 2 $T3 $B --sample 1 --resume "$CK" --prompt "$PROMPT" > "$TMP/fit.out" 2> "$TMP/fit.err"
st=$?
check "the default --sample-len past --max-seq: one note, $(wc -c < "$TMP/fit.out") bytes of samples: $(cat "$TMP/fit.err")" \
    $([ $st -eq 0 ] && [ "$(grep -c . "$TMP/fit.err")" -eq 1 ] &&
      grep -q "^note: --sample-len 64 (the default) after a context of 5 tokens .* needs 68 positions; the model has 64 (--max-seq): 60 tokens per sample" "$TMP/fit.err"; echo $?)
make_shard "$TMP/train250.bin" 2000 250
$T0 --preset tiny --vocab 250 --train "$TMP/train250.bin" --steps 0 --quiet 1 --save "$TMP/ck250" > /dev/null 2>&1
expect_error "a prompt token outside the model's vocabulary" "--prompt: token 464 \('The'\) is outside the model's vocabulary of 250 tokens" 1 \
    $T0 $B --vocab 250 --sample 1 --resume "$TMP/ck250" --prompt "The" --sample-len 8
expect_error "--kv-cache 0 in training: the batch is too small for the samples" "--kv-cache 0: 3 samples of 16 positions need the full forward's --batch >= 3" 1 \
    $T0 --preset tiny --threads 1 --train "$TMP/train.bin" --batch 2 --seq 32 --steps 1 --sample-every 1 --sample-len 16 --num-samples 3 --kv-cache 0
expect_error "--sample 1 with a flag for another model than the checkpoint's" "--arch llama disagrees with the checkpoint's gpt2" 1 \
    $T0 $B --arch llama --sample 1 --resume "$CK"
$T0 $B --sample 1 --resume "$CK" --steps 5 --lr 1 --offload-dpu 1 --offload-ratio 0.5 --sample-len 4 > /dev/null 2> "$TMP/note1.txt"
grep -q "note: --sample: 1 samples and does not train: --steps, --lr, --offload-dpu, --offload-ratio have no effect" "$TMP/note1.txt" &&
    [ "$(grep -c "note:.*offload-ratio" "$TMP/note1.txt")" -eq 1 ]
st=$?; check "note: training flags with --sample 1, each named once ($(grep -m1 "note: --sample" "$TMP/note1.txt"))" $st
$T0 $B --train "$TMP/train.bin" --batch 2 --seq 32 --steps 1 --temperature 0.5 --top-k 3 > /dev/null 2> "$TMP/note2.txt"
grep -q "note: --temperature, --top-k have no effect without --sample 1 or --sample-every N" "$TMP/note2.txt"
st=$?; check "note: sampling flags without sampling ($(head -1 "$TMP/note2.txt"))" $st

echo "$fails failed"
[ $fails -eq 0 ]
