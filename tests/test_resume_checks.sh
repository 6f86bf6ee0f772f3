#!/usr/bin/env bash
# --resume: the manifest's own checksum, the fall-back to the newest checkpoint that
# verifies (saying which it skipped and why), old manifests, what a resumed run must share
# with its checkpoint (sequence length, global batch, data, steps left), --keep-last, and the
# newer checkpoints of a run abandoned by resuming from an older one.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu build/export_model || exit 1
B=./build/z0/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1 --lr-schedule constant --threads 1"
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
[ $fails -eq 0 ]
