#!/usr/bin/env bash
# --resume: the manifest's own checksum, the fall-back to the newest checkpoint that
# verifies (saying which it skipped and why), old manifests, what a resumed run must share
# with its checkpoint (sequence length, global batch, data, steps left), --keep-last; what it
# takes from its checkpoint (the model, sequence length, batch, --steps, the schedule's horizon);
# the newer checkpoints of a run abandoned by resuming from an older one.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu build/export_model || exit 1
B=./build/z0/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1 --lr-schedule constant --threads 1"
M="$M --shuffle 1 --sample-every 1 --sample-len 4"   # what the random state drives, in every resume below
$B $M --steps 4 --save "$TMP/run" --save-every 2 --log "$TMP/full.jsonl" > /dev/null || exit 1
C4="$TMP/run/ckpt_00000004"

echo "== the manifest carries its own checksum"
grep -q '"manifest_crc32"' "$C4/manifest.json"; check "manifest.json has manifest_crc32" $?
cp -r "$C4" "$TMP/edited"
sed -i 's/"step":\t4/"step":\t3/' "$TMP/edited/manifest.json"
expect_error "an edited step is refused" "manifest.json: the manifest's checksum .* does not match its content" 1 $B $M --steps 8 --resume "$TMP/edited"
cp -r "$C4" "$TMP/edited2"
sed -i 's/"offset":\t[0-9]*/"offset":\t0/' "$TMP/edited2/manifest.json"
expect_error "an edited data position is refused" "does not match its content" 1 $B $M --steps 8 --resume "$TMP/edited2"
$PY - "$C4/manifest.json" "$TMP/reformatted.json" <<'PYEOF'
import json, sys
json.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"), indent=1)
PYEOF
cp -r "$C4" "$TMP/reformatted" && cp "$TMP/reformatted.json" "$TMP/reformatted/manifest.json"
$B $M --steps 5 --resume "$TMP/reformatted" > /dev/null 2>&1; check "the same manifest reformatted (whitespace) still verifies" $?

echo "== --resume DIR falls back to the newest checkpoint that verifies"
cp -r "$TMP/run" "$TMP/fb"
printf '\x01' | dd of="$TMP/fb/ckpt_00000004/model.bin" bs=1 seek=3000 conv=notrunc 2> /dev/null
$B $M --steps 6 --resume "$TMP/fb" --log "$TMP/fb.jsonl" > "$TMP/fb.out" 2>&1; rc=$?
grep -E "warning|note|error" "$TMP/fb.out" | sed 's/^/       /'
[ $rc -eq 0 ] && grep -q "warning: --resume: skipped .*ckpt_00000004: .*model.bin: CRC-32 .* does not match" "$TMP/fb.out"
check "a corrupted newest checkpoint is skipped, naming it and why" $?
a=$(grep '"type":"train"' "$TMP/full.jsonl" | sed -n '3,4p' | grep -o '"loss":[^,]*')
b=$(grep '"type":"train"' "$TMP/fb.jsonl" | sed -n '1,2p' | grep -o '"loss":[^,]*')
[ -n "$a" ] && [ "$a" = "$b" ]; check "it resumed from ckpt_00000002: steps 3-4 repeat the original losses bitwise" $?
same_samples "$TMP/full.jsonl" "$TMP/fb.jsonl"; check "... and the original samples (shuffled data, temperature 1)" $?
./build/export_model "$TMP/fb" "$TMP/fb_hf" > "$TMP/fb_export.out" 2>&1; rc=$?
grep -E "warning|error" "$TMP/fb_export.out" | sed 's/^/       /'
[ $rc -eq 0 ] && grep -q "warning: export_model: skipped .*ckpt_00000004: .*CRC-32" "$TMP/fb_export.out" &&
    grep -q "warning: export_model: exporting .*ckpt_00000002, the newest checkpoint of .*fb that verifies" "$TMP/fb_export.out"
check "export_model of the same directory says it skipped ckpt_00000004 and exports ckpt_00000002" $?
expect_error "export_model of the damaged checkpoint named: refused, no fall-back" "ckpt_00000004/model.bin: CRC-32 .* does not match" 1 \
    ./build/export_model "$TMP/fb/ckpt_00000004" "$TMP/fb_hf4"
cp -r "$TMP/fb/ckpt_00000004" "$TMP/ckpt_00000009" && rm "$TMP/ckpt_00000009/manifest.json"
expect_error "export_model of a checkpoint named without its manifest" "ckpt_00000009/?: not a complete checkpoint \(no manifest.json\)" 1 \
    ./build/export_model "$TMP/ckpt_00000009/" "$TMP/fb_hf9"
rm -rf "$TMP/fb/ckpt_00000002/optim_rank_00000.bin"
expect_error "nothing verifies: one line naming the newest's problem" "none of its 2 checkpoints verifies \\(the newest: .*CRC-32" 1 $B $M --steps 6 --resume "$TMP/fb"
cp -r "$C4" "$TMP/named"; truncate -s 5000 "$TMP/named/model.bin"
expect_error "a damaged checkpoint named directly is refused (no fall-back)" "named/model.bin: 5000 bytes, the manifest says" 1 $B $M --steps 6 --resume "$TMP/named"

echo "== a format-1 manifest (before the checksum) is accepted with a note"
cp -r "$C4" "$TMP/old"
$PY - "$TMP/old/manifest.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["format"] = 1
del m["manifest_crc32"], m["train"]["train_tokens"], m["train"]["train_crc32"]
json.dump(m, open(sys.argv[1], "w"), indent=1)
PYEOF
$B $M --steps 6 --resume "$TMP/old" > "$TMP/old.out" 2>&1; rc=$?
sed 's/^/       /' "$TMP/old.out"
[ $rc -eq 0 ] && grep -q "note: .*a format-1 manifest" "$TMP/old.out"; check "format 1: resumed, with a note on what cannot be verified" $?

echo "== steps past 99,999,999: nine-digit checkpoint names are scanned, pruned and fallen back to (issue 33)"
mkdir -p "$TMP/big" && cp -r "$TMP/old" "$TMP/big/ckpt_99999999"
sed -i 's/"step": 4,/"step": 99999999,/' "$TMP/big/ckpt_99999999/manifest.json"
$B $M --steps 100000002 --save-every 1 --keep-last 2 --resume "$TMP/big" --save "$TMP/big" > "$TMP/big.out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(cd "$TMP/big" && ls -d ckpt_* | tr '\n' ' ')" = "ckpt_100000001 ckpt_100000002 " ]
check "--keep-last 2 after saves at steps 100000000-100000002: ckpt_100000001 ckpt_100000002 left (exit $rc)" $?
truncate -s 5000 "$TMP/big/ckpt_100000002/model.bin"
$B $M --steps 100000003 --resume "$TMP/big" --quiet 0 > "$TMP/big2.out" 2>&1; rc=$?
grep -E "skipped|resumed from" "$TMP/big2.out" | sed 's/^/       /'
[ $rc -eq 0 ] && grep -q "resumed from $TMP/big/ckpt_100000001 at step 100000001" "$TMP/big2.out"
check "latest's ckpt_100000002 damaged: the fall-back takes ckpt_100000001" $?

echo "== an optimizer shard whose CRC was forged still holds only what AdamW writes"
# forge OUT WHICH VALUE: a copy of C4 with element 5 of m (0) or v (1) set, its CRC recomputed, a format-1 manifest
forge() {
    cp -r "$C4" "$TMP/$1"
    $PY - "$TMP/$1" "$2" "$3" <<'PYEOF'
import json, sys, zlib, numpy as np
d, which, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
b = bytearray(open(d + "/optim_rank_00000.bin", "rb").read())
a = np.frombuffer(b, dtype=np.float32, offset=1024)
a[which * (a.size // 2) + 5] = value
open(d + "/optim_rank_00000.bin", "wb").write(b)
m = json.load(open(d + "/manifest.json"))
m["format"] = 1
del m["manifest_crc32"], m["train"]["train_tokens"], m["train"]["train_crc32"]
for f in m["files"]:
    if f["name"] == "optim_rank_00000.bin": f["crc32"] = "%08x" % zlib.crc32(bytes(b))
json.dump(m, open(d + "/manifest.json", "w"), indent=1)
PYEOF
}
forge vneg 1 -1; forge vinf 1 inf; forge mnan 0 nan
expect_error "a negative v" "vneg/optim_rank_00000.bin: the second moment v holds -1 at element 5 of unit" 1 $B $M --steps 6 --resume "$TMP/vneg"
expect_error "an infinite v" "vinf/optim_rank_00000.bin: the second moment v holds inf at element 5" 1 $B $M --steps 6 --resume "$TMP/vinf"
expect_error "a NaN m" "mnan/optim_rank_00000.bin: the first moment m holds nan at element 5" 1 $B $M --steps 6 --resume "$TMP/mnan"

echo "== what a resumed run must share with its checkpoint"
expect_error "--steps at the checkpoint's step" "--steps 4 is at or below the checkpoint's step 4" 1 $B $M --steps 4 --resume "$TMP/run"
expect_error "another sequence length" "--seq 8 differs from the checkpoint's sequence length 16" 1 $B $M --steps 6 --seq 8 --resume "$TMP/run"
expect_error "another global batch" "global batch of 4 sequences .* differs from the checkpoint's 2" 1 $B $M --steps 6 --batch 4 --resume "$TMP/run"
make_shard "$TMP/other.bin" 20000 250 7
expect_error "other data" "--train .*other.bin holds other data .* than the checkpoint trained on" 1 $B $M --steps 6 --train "$TMP/other.bin" --resume "$TMP/run"
cp "$TMP/train.bin" "$TMP/moved.bin"
$B $M --steps 6 --train "$TMP/moved.bin" --resume "$TMP/run" > "$TMP/moved.out" 2>&1 && grep -q "note: .*holds the same tokens: resuming" "$TMP/moved.out"
check "the same data under another path: accepted with a note" $?
$B $M --steps 6 --batch 1 --accum 2 --resume "$TMP/run" > "$TMP/regroup.out" 2>&1 && grep -q "note: .*regrouped as 1 x 2 x 1: the same global batch" "$TMP/regroup.out"
check "the same global batch regrouped (micro batch 1 x accumulation 2): accepted with a note" $?

echo "== --keep-last K prunes older checkpoints once a newer one is complete"
$B $M --steps 5 --save-every 1 --keep-last 2 --save "$TMP/keep" > /dev/null || exit 1
[ "$(cd "$TMP/keep" && ls -d ckpt_* | tr '\n' ' ')" = "ckpt_00000004 ckpt_00000005 " ]; check "--keep-last 2 after 5 saves: ckpt_00000004 ckpt_00000005" $?
expect_error "a failed save at step 6 (--keep-last 1)" "ckpt_00000006 not saved" 1 \
    env ZEROC_FAIL_WRITE=model.bin:last $B $M --steps 6 --save-every 1 --keep-last 1 --resume "$TMP/keep" --save "$TMP/keep"
[ "$(cd "$TMP/keep" && ls -d ckpt_* | tr '\n' ' ')" = "ckpt_00000004 ckpt_00000005 " ]; check "nothing pruned by a save that failed" $?

echo "== resumed from an older checkpoint: the abandoned run's newer ones are set aside, never pruned wrongly or resumed later"
cp -r "$TMP/run" "$TMP/br"   # ckpt_00000002 and ckpt_00000004
$B $M --steps 3 --save-every 1 --keep-last 1 --resume "$TMP/br/ckpt_00000002" --save "$TMP/br" > "$TMP/br.out" 2>&1; rc=$?
grep -E "note|warning|error|removed|saved" "$TMP/br.out" | sed 's/^/       /'
[ $rc -eq 0 ] && grep -q "note: .*br: set aside ckpt_00000004, newer than step 2 this run starts from, in .*br/abandoned_00000002" "$TMP/br.out"
check "one line says where ckpt_00000004 of the abandoned run went" $?
[ "$(cat "$TMP/br/latest")" = ckpt_00000003 ] && [ "$(cd "$TMP/br" && ls -d ckpt_* | tr '\n' ' ')" = "ckpt_00000003 " ] &&
    [ -f "$TMP/br/abandoned_00000002/ckpt_00000004/manifest.json" ]
check "--keep-last 1 kept the checkpoint just saved, ckpt_00000003, which latest names; ckpt_00000004 is in abandoned_00000002/" $?
$B $M --steps 5 --resume "$TMP/br" --log "$TMP/br.jsonl" > /dev/null 2>&1 && [ "$(grep -c '"type":"train"' "$TMP/br.jsonl")" -eq 2 ]
check "the next --resume continues this run from step 3 (2 steps to 5), not the abandoned one at 4" $?

echo "== --resume takes the model, sequence length, batch and --steps from its checkpoint (as nanoGPT's resume)"
M2="--arch llama --layers 3 --dim 32 --heads 4 --vocab 250 --batch 2 --accum 2 --seq 12 --train $TMP/train.bin --threads 1"
$B $M2 --steps 6 --save "$TMP/m2" --save-every 3 --quiet 1 > /dev/null || exit 1
C3="$TMP/m2/ckpt_00000003"
$B $M2 --steps 6 --resume "$C3" --save "$TMP/with" --log "$TMP/with.jsonl" --quiet 1 > /dev/null 2>&1; a=$?
$B --train "$TMP/train.bin" --quiet 1 --threads 1 --resume "$C3" --save "$TMP/without" --log "$TMP/without.jsonl" > "$TMP/without.out" 2>&1; b=$?
sed 's/^/       /' "$TMP/without.out"
la=$(grep '"type":"train"' "$TMP/with.jsonl" | grep -o '"loss":[^,]*' | tr '\n' ' ')
lb=$(grep '"type":"train"' "$TMP/without.jsonl" | grep -o '"loss":[^,]*' | tr '\n' ' ')
echo "       with the flags:    $la"; echo "       without any:       $lb"
fa=$(cd "$TMP/with/ckpt_00000006" 2> /dev/null && sha256sum model.bin optim_rank_*.bin); fb=$(cd "$TMP/without/ckpt_00000006" 2> /dev/null && sha256sum model.bin optim_rank_*.bin)
[ $a -eq 0 ] && [ $b -eq 0 ] && [ -n "$la" ] && [ "$la" = "$lb" ] && [ -n "$fa" ] && [ "$fa" = "$fb" ]
check "resume without --arch, sizes, --seq, --batch, --accum, --steps = resume with them: losses and saved files bitwise" $?
expect_error "an explicit flag that disagrees names both values" "--arch gpt2 disagrees with the checkpoint's llama \\($C3\\)" 1 \
    $B --train "$TMP/train.bin" --threads 1 --arch gpt2 --resume "$C3"
expect_error "a size flag that disagrees" "--dim 64 disagrees with the checkpoint's width 32" 1 $B --train "$TMP/train.bin" --threads 1 --dim 64 --resume "$C3"
expect_error "--init of another model: a flag disagrees with the model file" "--layers 2 disagrees with the model file's layers 3" 1 \
    $B --train "$TMP/train.bin" --threads 1 --layers 2 --init "$C3/model.bin" --steps 1
# without --arch, a llama checkpoint is judged as llama: its --kv-heads and its own preset are not gpt2's
$B --train "$TMP/train.bin" --threads 1 --quiet 1 --kv-heads 2 --resume "$C3" > "$TMP/kv.out" 2>&1; a=$?
$B --train "$TMP/train.bin" --threads 1 --quiet 1 --preset tiny --layers 3 --dim 32 --vocab 250 --resume "$C3" > "$TMP/pre.out" 2>&1; b=$?
grep -h "error" "$TMP/kv.out" "$TMP/pre.out" | sed 's/^/       /'
[ $a -eq 0 ] && [ $b -eq 0 ]; check "a llama checkpoint resumed with its --kv-heads 2 (exit $a) and with --preset tiny and its sizes (exit $b), no --arch" $?
# the newest checkpoint, of another model, does not verify: the fall-back's model differs, and the line says so
mkdir -p "$TMP/mixed" && cp -r "$C3" "$TMP/mixed/ckpt_00000001" && cp -r "$C4" "$TMP/mixed/ckpt_00000002"
printf '\x01' | dd of="$TMP/mixed/ckpt_00000002/model.bin" bs=1 seek=3000 conv=notrunc 2> /dev/null
expect_error "a fall-back to a checkpoint of another model: no 'check --arch' when none was given" \
    "ckpt_00000001: checkpoint has [0-9]+ parameters, this run's model has [0-9]+: the run took its model from the newest readable checkpoint in .*mixed, which did not verify" 1 \
    $B --train "$TMP/train.bin" --threads 1 --resume "$TMP/mixed" --steps 9
text() { "$@" 2>&1 | tail -2 | head -1; }   # the sample: the line before "sampled ..."
s1=$($B --sample 1 --resume "$TMP/m2" --sample-len 6 --seed 5 --threads 1 2>&1); st=$?
s2=$(text $B --sample 1 --init "$TMP/m2/ckpt_00000006/model.bin" --sample-len 6 --seed 5 --threads 1)
s3=$(text $B $M2 --sample 1 --init "$TMP/m2/ckpt_00000006/model.bin" --sample-len 6 --seed 5)
echo "$s1" | grep -a "^zeroc" | sed 's/^/       /'
[ $st -eq 0 ] && echo "$s1" | grep -aq "llama (checkpoint): 3 layers" && [ "$(echo "$s1" | tail -2 | head -1)" = "$s2" ] && [ "$s2" = "$s3" ] && [ -n "$s2" ]
check "--sample 1 with --resume DIR or --init model.bin alone: the file's model, the same text as with the flags" $?

echo "== a larger --steps on --resume keeps the checkpoint's schedule (nanoGPT's lr_decay_iters, DeepSpeed's total_num_steps)"
S="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1 --threads 1"
$B $S --steps 8 --save "$TMP/s8" > /dev/null || exit 1
$B $S --steps 10 --log "$TMP/fresh10.jsonl" > /dev/null || exit 1
$B $S --steps 10 --resume "$TMP/s8" --log "$TMP/kept.jsonl" > "$TMP/kept.out" 2>&1
$B $S --steps 10 --lr-total-steps 0 --resume "$TMP/s8" --log "$TMP/replan.jsonl" > /dev/null 2>&1
grep "note: --resume" "$TMP/kept.out" | sed 's/^/       /'
lr() { grep '"type":"train"' "$1" | grep "\"step\":$2," | grep -o '"lr":[^,]*' | cut -d: -f2; }
echo "       lr at step 9: kept $(lr "$TMP/kept.jsonl" 9), re-planned $(lr "$TMP/replan.jsonl" 9), a fresh 10-step run $(lr "$TMP/fresh10.jsonl" 9)"
[ "$(lr "$TMP/kept.jsonl" 9)" = "$(lr "$TMP/kept.jsonl" 10)" ] && grep -q "note: --resume: the learning-rate schedule is the checkpoint's, planned for 8 steps: steps 9-10 continue it past its end" "$TMP/kept.out"
check "steps 9-10 at the 8-step cosine's floor, with one note" $?
[ -n "$(lr "$TMP/replan.jsonl" 9)" ] && [ "$(lr "$TMP/replan.jsonl" 9)" = "$(lr "$TMP/fresh10.jsonl" 9)" ]
check "--lr-total-steps 0 re-plans it to --steps 10: step 9's lr is a fresh 10-step run's" $?

[ $fails -eq 0 ]
