#!/usr/bin/env bash
# Sharded data (dataloader.h): the batch order checked from the tokens (tests/dataloader_test.c:
# shards == one file, 3 ranks disjoint, shuffle, tell/seek, > 2^31 tokens with sparse files),
# then the trainer: a directory of shards trains exactly like the single file, resume across
# shard and epoch boundaries is bitwise identical, 3 ranks == 1 rank with 3x the micro batch
# with shuffling, an older checkpoint's data_pos resumes, and bad data specs are one-line errors.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/dataloader_test build/z0/train_gpt_cpu || exit 1
TR=./build/z0/train_gpt_cpu

echo "== the batch order, from tokens that hold their own positions"
./build/dataloader_test "$TMP/order"; check "dataloader_test (6 shards, 59505 tokens)" $?

# sparse files: 2 x 3 GB apparent, a few KB on disk (skipped where the file system cannot)
truncate -s 1G "$TMP/probe" 2>/dev/null
if [ -f "$TMP/probe" ] && [ "$(du -k "$TMP/probe" | cut -f1)" -lt 1024 ]; then
    rm -f "$TMP/probe"
    ./build/dataloader_test --big "$TMP/big"; check "more than 2^31 tokens (sparse shards)" $?
    ./build/dataloader_test --big-bad "$TMP/bigbad" > "$TMP/bad.out" 2> "$TMP/bad.err"; rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l < "$TMP/bad.err")" -eq 1 ] && grep -q "big_000001.bin: token id 60000 at position 647483653 is out of range" "$TMP/bad.err"
    st=$?; check "a bad token beyond 2^31 is found when its batch is read: $(cat "$TMP/bad.err")" $st
    rm -rf "$TMP/big" "$TMP/bigbad"
else
    echo "  skip more than 2^31 tokens: $TMP does not make sparse files"
fi

echo "== the trainer on shards"
# 3000 tokens cut into 4 uneven shards (one epoch = 23 micro-steps of 4 x 32)
make_shard "$TMP/whole.bin" 3000 250
mkdir -p "$TMP/shards" "$TMP/other"
$PY - "$TMP/whole.bin" "$TMP/shards" 700 1100 333 867 <<'PYEOF' || exit 1
import sys, numpy as np
src, out, sizes = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
tok = np.fromfile(src, dtype="<u2", offset=1024)
assert sum(sizes) == len(tok)
a = 0
for i, n in enumerate(sizes):
    h = np.zeros(256, dtype="<i4"); h[:3] = [20240520, 1, n]
    open(f"{out}/train_{i:06d}.bin", "wb").write(h.tobytes() + tok[a:a + n].tobytes())
    a += n
PYEOF
losses() { grep '"type":"train"' "$1" | grep -o '"loss":[^,]*' | tr '\n' ' '; }
M="--preset tiny --vocab 250 --seq 32 --quiet 1 --lr 1e-3 --threads 1"
$TR $M --batch 4 --steps 30 --train "$TMP/whole.bin" --log "$TMP/whole.jsonl" > /dev/null || exit 1
$TR $M --batch 4 --steps 30 --train "$TMP/shards" --log "$TMP/dir.jsonl" > /dev/null || exit 1
$TR $M --batch 4 --steps 30 --train "$TMP/shards/train_*.bin" --log "$TMP/glob.jsonl" > /dev/null || exit 1
a=$(losses "$TMP/whole.jsonl"); b=$(losses "$TMP/dir.jsonl"); c=$(losses "$TMP/glob.jsonl")
echo "       $(echo "$a" | cut -c1-90) ..."
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]
check "4 shards (a directory, a glob) give the single file's 30 losses bitwise, across an epoch end" $?

# shuffled, 2 ranks, a checkpoint every 3 steps; resume from the ones just before a shard and an epoch change
S="$M --batch 2 --steps 30 --train $TMP/shards --shuffle 1 --seed 7 --sample-every 3 --sample-len 4"
$MPIRUN -np 2 $TR $S --save "$TMP/ck" --save-every 3 --log "$TMP/full.jsonl" > /dev/null || exit 1
pick=$($PY - "$TMP/ck" <<'PYEOF'
import json, sys
d = {s: json.load(open(f"{sys.argv[1]}/ckpt_{s:08d}/manifest.json"))["data"] for s in range(3, 30, 3)}
shard = next(s for s in range(3, 27, 3) if d[s]["epoch"] == d[s + 3]["epoch"] and d[s]["shard"] != d[s + 3]["shard"])
epoch = next(s for s in range(3, 27, 3) if d[s]["epoch"] != d[s + 3]["epoch"])
for s in (shard, epoch):
    print("       checkpoint %d: epoch %d shard %d (%s) offset %d; at %d: epoch %d shard %d" % (
        s, d[s]["epoch"], d[s]["shard"], d[s]["shard_file"], d[s]["offset"], s + 3, d[s + 3]["epoch"], d[s + 3]["shard"]), file=open(sys.argv[1] + "/picked.txt", "a"))
print(shard, epoch)
PYEOF
) || exit 1
cat "$TMP/ck/picked.txt"
for s in $pick; do
    $MPIRUN -np 2 $TR $S --resume "$TMP/ck/ckpt_$(printf %08d $s)" --log "$TMP/res_$s.jsonl" > /dev/null || exit 1
    a=$(grep '"type":"train"' "$TMP/full.jsonl" | tail -n +$((s + 1)) | grep -o '"loss":[^,]*'); b=$(grep -o '"loss":[^,]*' "$TMP/res_$s.jsonl")
    [ -n "$b" ] && [ "$a" = "$b" ]
    st=$?; check "shuffled, 2 ranks: resume at step $s, the next steps change shard or epoch: $(echo "$b" | wc -l) losses bitwise identical" $st
    same_samples "$TMP/full.jsonl" "$TMP/res_$s.jsonl"; check "... and the samples (every 3 steps, temperature 1) are the unbroken run's" $?
done
cmp -s "$TMP/ck/ckpt_00000030/model.bin" <($MPIRUN -np 2 $TR $S --resume "$TMP/ck/ckpt_00000012" --save "$TMP/ck2" > /dev/null && cat "$TMP/ck2/ckpt_00000030/model.bin")
check "resumed at step 12: the final weights are bitwise identical" $?

# 3 ranks x micro batch 2 read what 1 rank x 6 reads (shuffled): the same losses
$MPIRUN -np 3 $TR $M --batch 2 --steps 8 --train "$TMP/shards" --shuffle 1 --log "$TMP/w3.jsonl" > /dev/null || exit 1
$TR $M --batch 6 --steps 8 --train "$TMP/shards" --shuffle 1 --log "$TMP/w1.jsonl" > /dev/null || exit 1
compare_losses "$TMP/w3.jsonl" "$TMP/w1.jsonl" 8 1e-5 "3 ranks x 2 vs 1 rank x 6, shuffled"
check "3 ranks read disjoint sequences that together are the 1-rank micro batch" $?

# the PyTorch reference (scripts/train_gpt.py) reads the same order: shuffled shards, across an epoch end
P="--preset tiny --vocab 250 --seq 32 --lr 1e-3 --batch 8 --steps 14 --train $TMP/shards --shuffle 1 --seed 3"
$TR $P --quiet 1 --threads 1 --log "$TMP/c_ref.jsonl" > /dev/null || exit 1
$PY scripts/train_gpt.py $P --quiet 1 --threads 1 --log "$TMP/py_ref.jsonl" > "$TMP/py.out" 2>&1 || { cat "$TMP/py.out"; exit 1; }
compare_losses "$TMP/c_ref.jsonl" "$TMP/py_ref.jsonl" 14 2e-6 "C vs PyTorch reference, --shuffle 1 on 4 shards, 14 steps (an epoch is 11)"
check "scripts/train_gpt.py implements the same shuffled order" $?

# an older checkpoint (manifest "data_pos", a token offset) still resumes
$TR $M --batch 4 --steps 10 --train "$TMP/whole.bin" --save "$TMP/old" --save-every 5 --log "$TMP/old.jsonl" > /dev/null || exit 1
$PY - "$TMP/old/ckpt_00000005/manifest.json" <<'PYEOF' || exit 1
import json, sys
m = json.load(open(sys.argv[1]))
del m["data"], m["manifest_crc32"], m["train"]["train_tokens"], m["train"]["train_crc32"]
m["format"] = 1          # as written before checksums (and shards)
m["data_pos"] = 5 * 4 * 32
json.dump(m, open(sys.argv[1], "w"), indent=2)
PYEOF
$TR $M --batch 4 --steps 10 --train "$TMP/whole.bin" --resume "$TMP/old/ckpt_00000005" --log "$TMP/old2.jsonl" > /dev/null
[ "$(grep '"type":"train"' "$TMP/old.jsonl" | tail -n 5 | grep -o '"loss":[^,]*')" = "$(grep -o '"loss":[^,]*' "$TMP/old2.jsonl")" ]
check "a manifest with the older \"data_pos\": 640 resumes with the same 5 losses" $?

echo "== what is read: said at start-up and in the log's config record"
# 4 shards of 3000 tokens at batch 4 x 32, 2 ranks, accumulation 2: 93 sequences per epoch, 11 micro-steps
# of 8 sequences, 5.5 optimizer steps of 16
$MPIRUN -np 2 $TR --preset tiny --vocab 250 --seq 32 --threads 1 --batch 4 --accum 2 --steps 2 --seed 11 --train "$TMP/shards" \
    --val "$TMP/whole.bin" --val-every 1 --val-batches 2 --log "$TMP/said.jsonl" > "$TMP/said.out" 2>&1
grep -E "^       (train|val):" "$TMP/said.out" | sed 's/^/     /'
grep -qF "train: $TMP/shards: 4 shards (train_000000.bin ... train_000003.bin), 3000 tokens, 93 sequences of 32 per epoch = 5.5 steps of 16 sequences; --steps 2: 0.364 epochs" "$TMP/said.out" &&
    grep -qF "val:   $TMP/whole.bin: 1 shard, 3000 tokens, 93 sequences of 32 per epoch | 2 batches of 8 sequences every 1 steps" "$TMP/said.out" &&
    ! grep -q "warning" "$TMP/said.out"
check "start-up: the training data's shards, tokens, sequences and steps per epoch; the validation data" $?
$PY - "$TMP/said.jsonl" "$TMP/shards" "$TMP/whole.bin" <<'PYEOF'
import json, sys
c = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "config"][0]
m, d = c["model"], c["data"]
ok = (m["arch"], m["preset"], m["n_layer"], m["n_head"], m["d_model"], m["vocab_size"], m["max_seq"]) == ("gpt2", "tiny", 2, 4, 64, 250, 64)
ok = ok and c["seed"] == 11 and (d["train"], d["val"], d["val_every"], d["val_batches"]) == (sys.argv[2], sys.argv[3], 1, 2)
ok = ok and (d["train_shards"], d["train_tokens"], d["sequences_per_epoch"], d["steps_per_epoch"], d["val_tokens"]) == (4, 3000, 93, 5.5, 3000)
print("       config record: model %s, seed %s, data %s" % (m, c["seed"], d))
sys.exit(0 if ok else 1)
PYEOF
check "the JSONL config record holds the architecture, sizes, data paths, what they hold, and the seed" $?
# training on other data while validating on the default Brown split: said, not silent
$TR --preset tiny --vocab 50257 --seq 32 --threads 1 --batch 2 --steps 1 --train "$TMP/shards" --val-every 1 --val-batches 1 > "$TMP/dv.out" 2>&1
grep -q "(the default, Brown's validation split: --val PATH for another)" "$TMP/dv.out" &&
    grep -q "^warning: validation reads data/brown/val.bin, the default (Brown), while training reads $TMP/shards" "$TMP/dv.out"
check "without --val: validation on Brown is said: $(grep -m1 warning "$TMP/dv.out" | cut -c1-90)..." $?
$TR $M --batch 4 --steps 1 --train "$TMP/whole.bin" --quiet 0 > "$TMP/nv.out" 2>&1
grep -q "^       val:   none (--val-every N validates every N steps)" "$TMP/nv.out"
check "no validation: said" $?

echo "== bad data specs: one line"
expect_error "directory without shards" "other: directory holds no .bin" 1 $TR $M --train "$TMP/other"
expect_error "glob that matches nothing" "nothing_\*.bin: no file matches" 1 $TR $M --train "$TMP/nothing_*.bin"
cp -r "$TMP/shards" "$TMP/more"; cp "$TMP/whole.bin" "$TMP/more/zz.bin"
expect_error "resume with other data" "holds other data .* than the checkpoint trained on" 2 $MPIRUN -np 2 $TR $S --steps 31 --train "$TMP/more" --resume "$TMP/ck"
expect_error "resume with another shuffle" "this run asks for --shuffle 0" 2 $MPIRUN -np 2 $TR $S --steps 31 --shuffle 0 --resume "$TMP/ck"
expect_error "resume with another --seq" "--seq 16 differs from the checkpoint.s sequence length 32" 2 $MPIRUN -np 2 $TR $S --steps 31 --seq 16 --resume "$TMP/ck"
expect_error "--shuffle 2" "--shuffle: expected an integer in \[0, 1\]" 1 $TR --shuffle 2
cp -r "$TMP/shards" "$TMP/badset"; make_shard "$TMP/badset/zz.bin" 3000 300
expect_error "a bad shard among good ones" "badset/zz.bin: token id .* out of range for vocabulary size 250" 1 $TR $M --train "$TMP/badset"
[ $fails -eq 0 ]
