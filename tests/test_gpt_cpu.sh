#!/usr/bin/env bash
# The CPU trainer against the PyTorch reference (both architectures, odd sizes),
# then checkpoint, continue, reload, rerun: bitwise-identical losses.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu build/z0/test_gpt_cpu || exit 1
make_shard "$TMP/train.bin" 50000 250
for arch in gpt2 llama; do
    M="--arch $arch --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 32"
    [ $arch = llama ] && M="$M --kv-heads 2"
    # clipping active on some of the 10 steps and not on others, so that the clip coefficient is compared
    CLIP=1.0; [ $arch = llama ] && CLIP=0.9
    # eps 1e-4: with 1e-8, an element whose gradient is float noise (the key bias's is exactly zero) moves by
    # +-lr on its sign, so final parameters would agree only to ~1e-4; a flipped weight-decay flag moves its
    # tensor by lr * wd * 10 steps = 1e-3 of its size, the per-tensor check's margin over 1e-5
    echo "== $arch: C vs PyTorch on one batch and 10 AdamW steps, the final parameters per tensor, the decayed tensors"
    ./build/z0/train_gpt_cpu $M --train "$TMP/train.bin" --steps 0 --save "$TMP/init_$arch" --quiet 1 > /dev/null || exit 1
    INIT="$TMP/init_$arch/ckpt_00000000/model.bin"
    $PY scripts/train_gpt.py $M --train "$TMP/train.bin" --init "$INIT" --batch 4 --lr 1e-3 --clip $CLIP --eps 1e-4 \
        --debug-state "$TMP/dbg_$arch.bin" > "$TMP/py.out" 2>&1 || { cat "$TMP/py.out"; exit 1; }
    ./build/z0/test_gpt_cpu $M --state "$TMP/dbg_$arch.bin" --init "$INIT" --threads 2 | tee "$TMP/cmp_$arch.out"
    check "$arch matches PyTorch" ${PIPESTATUS[0]}
    n=$(grep -c "^  step .* clipped" "$TMP/cmp_$arch.out")
    [ "$n" -gt 0 ] && [ "$n" -lt 10 ]; check "$arch: clipping active on $n of the 10 steps (some, not all)" $?
done

echo "== learning-rate schedules: C and the PyTorch reference log the same lr at every step"
M="--arch gpt2 --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 16 --batch 2 --train $TMP/train.bin --steps 12 --quiet 1"
for sched in "cosine --warmup 3" "constant" "WarmupLR --warmup 5 --warmup-type log" "WarmupLR --warmup 4 --warmup-type linear" \
             "WarmupDecayLR --warmup 4 --warmup-min-lr 1e-4" "WarmupCosineLR --warmup 3 --warmup-min-ratio 0.1 --cos-min-ratio 0.05"; do
    ./build/z0/train_gpt_cpu $M --lr-schedule $sched --log "$TMP/lr_c.jsonl" > /dev/null || exit 1
    $PY scripts/train_gpt.py $M --lr-schedule $sched --log "$TMP/lr_py.jsonl" > /dev/null 2>&1 || exit 1
    $PY - "$TMP/lr_c.jsonl" "$TMP/lr_py.jsonl" <<'PYEOF'
import json, sys
a = [r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
b = [r["lr"] for r in map(json.loads, open(sys.argv[2])) if r.get("type") == "train"]
d = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
print("       " + " ".join(f"{x:.2e}" for x in a[:8]) + " ...  max rel diff %.1e" % d)
sys.exit(0 if len(a) == len(b) == 12 and d < 1e-6 else 1)
PYEOF
    check "schedule $sched" $?
done

echo "== checkpoint, continue, reload, rerun: bitwise-identical losses, shuffled data and samples"
for arch in gpt2 llama; do
    # what the random state drives: the shuffled order, and samples at temperature 1 after the resume
    M="--arch $arch --preset tiny --vocab 250 --train $TMP/train.bin --batch 4 --seq 32 --steps 10 --quiet 1 --lr 1e-3"
    M="$M --shuffle 1 --sample-every 5 --sample-len 8 --temperature 1"
    ./build/z0/train_gpt_cpu $M --save "$TMP/ck_$arch" --save-every 5 --log "$TMP/full_$arch.jsonl" || exit 1
    ./build/z0/train_gpt_cpu $M --resume "$TMP/ck_$arch/ckpt_00000005" --log "$TMP/resumed_$arch.jsonl" || exit 1
    a=$(grep '"type":"train"' "$TMP/full_$arch.jsonl" | sed -n '6,10p' | grep -o '"loss":[^,]*')
    b=$(grep '"type":"train"' "$TMP/resumed_$arch.jsonl" | grep -o '"loss":[^,]*')
    echo "$b" | head -2 | sed 's/^/       resumed /'
    [ -n "$a" ] && [ "$a" = "$b" ]; check "$arch: steps 6-10 after resume are bitwise identical (5 losses)" $?
    same_samples "$TMP/full_$arch.jsonl" "$TMP/resumed_$arch.jsonl"; check "$arch: the sample after resume is the unbroken run's" $?
    cmp -s "$TMP/ck_$arch/ckpt_00000010/model.bin" <(./build/z0/train_gpt_cpu $M --resume "$TMP/ck_$arch/ckpt_00000005" \
        --save "$TMP/ck2_$arch" > /dev/null && cat "$TMP/ck2_$arch/ckpt_00000010/model.bin")
    check "$arch: final weights after resume are bitwise identical" $?
done
ls -a "$TMP/ck_gpt2" | grep -q "tmp" ; [ $? -ne 0 ]; check "no temporary checkpoint directories left behind" $?
[ "$(cat "$TMP/ck_gpt2/latest")" = "ckpt_00000010" ]; check "latest names the newest checkpoint" $?

echo "== resume at another world size and stage (resharding from the plan)"
make -s build/z1/train_gpt_cpu build/z2/train_gpt_cpu || exit 1
M="--arch llama --preset tiny --dim 48 --ffn 100 --vocab 250 --train $TMP/train.bin --seq 16 --steps 8 --total-batch 12 --quiet 1 --lr 1e-3 --threads 1"
$MPIRUN -np 4 ./build/z2/train_gpt_cpu $M --batch 3 --save "$TMP/rs" --save-every 4 --log "$TMP/rs4.jsonl" > /dev/null || exit 1
$MPIRUN -np 2 ./build/z1/train_gpt_cpu $M --batch 6 --resume "$TMP/rs/ckpt_00000004" --log "$TMP/rs2.jsonl" > /dev/null || exit 1
$PY - "$TMP/rs4.jsonl" "$TMP/rs2.jsonl" <<'PYEOF'
import json, sys
a = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"][4:]
b = [r["loss"] for r in map(json.loads, open(sys.argv[2])) if r.get("type") == "train"]
d = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"       stage 2 x 4 ranks -> stage 1 x 2 ranks at step 4: steps 5-8 max rel loss deviation {d:.2e}")
sys.exit(0 if len(a) == len(b) == 4 and d < 1e-5 else 1)
PYEOF
check "resume on 2 ranks at stage 1 from a 4-rank stage-2 checkpoint" $?

echo "== damaged checkpoints are refused with one line"
M="--arch gpt2 --preset tiny --vocab 250 --train $TMP/train.bin --batch 4 --seq 32 --steps 10 --quiet 1"
cp -r "$TMP/ck_gpt2/ckpt_00000005" "$TMP/bad1"
printf '\x01' | dd of="$TMP/bad1/optim_rank_00000.bin" bs=1 seek=2000 conv=notrunc 2>/dev/null
expect_error "corrupted optimizer file" "CRC-32" 1 ./build/z0/train_gpt_cpu $M --resume "$TMP/bad1"
cp -r "$TMP/ck_gpt2/ckpt_00000005" "$TMP/bad2"
truncate -s 5000 "$TMP/bad2/model.bin"
expect_error "truncated model file" "truncated" 1 ./build/z0/train_gpt_cpu $M --resume "$TMP/bad2"
expect_error "no checkpoint" "no checkpoint" 1 ./build/z0/train_gpt_cpu $M --resume "$TMP"
expect_error "a flag for another model than the checkpoint's" "--layers 3 disagrees with the checkpoint's layers 2" 1 ./build/z0/train_gpt_cpu $M --layers 3 --resume "$TMP/ck_gpt2"
[ $fails -eq 0 ]
