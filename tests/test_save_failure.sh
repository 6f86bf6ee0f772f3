#!/usr/bin/env bash
# A checkpoint save whose last write fails (ENOSPC) stops every rank with one line and
# a non-zero exit, removes its temporary files and leaves the previous checkpoint and
# `latest` untouched; a resume then continues from the previous checkpoint, bitwise (shuffled
# data and temperature-1 samples included).
# Two ways of failing: the fault-injecting write hook (ZEROC_FAIL_WRITE=FILE:N, util/common.h)
# on every checkpoint file, at 2 ranks (an optimizer shard written by rank 1 included),
# and a real full disk: a tmpfs sized so that the last page of each file does not fit
# (needs root to mount; skipped with a message elsewhere). The exporter stopped by a full disk mid-file
# leaves no temporary file.
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'umount "$TMP/mnt" 2> /dev/null; rm -rf "$TMP"' EXIT
make -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu build/export_model || exit 1
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1 --lr-schedule constant --threads 1"
M="$M --shuffle 1 --sample-every 1 --sample-len 4"   # what the random state drives: shuffled data, samples at temperature 1

# after a failed save into D: latest still names ckpt_00000002, nothing temporary is left,
# and ckpt_00000002 still resumes
left_as_before() {  # left_as_before NAME DIR
    local d="$2" junk
    junk=$(cd "$d" && ls -a | grep -E "tmp|old|^ckpt_00000004$")
    [ "$(cat "$d/latest")" = "ckpt_00000002" ] && [ -z "$junk" ]
    check "$1: latest unchanged, no temporary files left${junk:+ (found: $junk)}" $?
}

echo "== the write hook, 2 ranks, ZeRO-3 (two optimizer shards): each checkpoint file's last write, and a first write"
$MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --steps 2 --save "$TMP/base" > /dev/null || exit 1
for spec in model.bin:last optim_rank_00000.bin:last optim_rank_00001.bin:last manifest.json:last latest:last model.bin:1; do
    rm -rf "$TMP/d"; cp -r "$TMP/base" "$TMP/d"; rm -f "$TMP/d/.lock"
    file=${spec%%:*}
    expect_error "ENOSPC at $spec" "checkpoint ckpt_00000004 not saved: .*$file.*No space left on device" 2 \
        $MPIRUN -np 2 -x ZEROC_FAIL_WRITE=$spec ./build/z3/train_gpt_cpu $M --steps 4 --resume "$TMP/d" --save "$TMP/d"
    left_as_before "$spec" "$TMP/d"
done
echo "== the sync of the directory after latest's rename fails (EIO): the line says what is on disk"
rm -rf "$TMP/ds"; cp -r "$TMP/base" "$TMP/ds"; rm -f "$TMP/ds/.lock"
expect_error "EIO syncing the directory" "checkpoint ckpt_00000004 saved, but .*latest: cannot sync the directory .*: it is complete and .*latest names it" 2 \
    $MPIRUN -np 2 -x ZEROC_FAIL_WRITE=latest:dirsync ./build/z3/train_gpt_cpu $M --steps 4 --resume "$TMP/ds" --save "$TMP/ds"
[ "$(cat "$TMP/ds/latest")" = ckpt_00000004 ] && $MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --steps 5 --resume "$TMP/ds" \
    --log "$TMP/ds.jsonl" > /dev/null && [ "$(grep -c '"type":"train"' "$TMP/ds.jsonl")" -eq 1 ]
check "latest names ckpt_00000004, which is complete: a resume trains step 5 only" $?
# the last one failed at model.bin's first write; resuming now continues from step 2, bitwise as a run that never failed
$MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --steps 4 --resume "$TMP/d" --save "$TMP/d" --log "$TMP/d.jsonl" > /dev/null &&
    $MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --steps 4 --save "$TMP/clean" --log "$TMP/clean.jsonl" > /dev/null &&
    cmp -s "$TMP/d/ckpt_00000004/model.bin" "$TMP/clean/ckpt_00000004/model.bin"
check "after a failed save, the resumed run's step-4 weights equal an uninterrupted run's (bitwise, shuffled data)" $?
same_samples "$TMP/clean.jsonl" "$TMP/d.jsonl"; check "... and its samples after the resume (temperature 1)" $?

echo "== a real full disk: a tmpfs with room for all but the last page of each file (1 rank, stage 0)"
./build/z0/train_gpt_cpu $M --steps 2 --save "$TMP/ref" > /dev/null || exit 1
pages() { $PY -c "import os,sys; print(sum(-(-os.path.getsize(f) // 4096) for f in sys.argv[1:]))" "$@"; }
C="$TMP/ref/ckpt_00000002"
base=$(( $(pages "$C"/*) + 2 ))   # the previous checkpoint, latest and the lock file
mkdir -p "$TMP/mnt"
if ! mount -t tmpfs -o size=4m tmpfs "$TMP/mnt" 2> "$TMP/mount.err"; then
    echo "  skip the tmpfs part: cannot mount a tmpfs here ($(head -1 "$TMP/mount.err")); the write hook above covered every file"
else
    umount "$TMP/mnt"
    m=$(pages "$C/model.bin"); o=$(pages "$C/optim_rank_00000.bin"); j=$(pages "$C/manifest.json")
    for c in "model.bin $((base + m - 1))" "optim_rank_00000.bin $((base + m + o - 1))" \
             "manifest.json $((base + m + o + j - 1))" "latest $((base + m + o + j))"; do
        set -- $c
        mount -t tmpfs -o size=$(( $2 * 4 ))k tmpfs "$TMP/mnt" || exit 1
        cp -r "$TMP/ref/ckpt_00000002" "$TMP/ref/latest" "$TMP/mnt/"
        expect_error "tmpfs of $2 pages: ENOSPC in $1" "checkpoint ckpt_00000004 not saved: .*$1.*No space left on device" 1 \
            ./build/z0/train_gpt_cpu $M --steps 4 --resume "$TMP/mnt" --save "$TMP/mnt"
        left_as_before "tmpfs, $1" "$TMP/mnt"
        umount "$TMP/mnt"
    done
fi
echo "== export_model on a full disk: one line, and no model.safetensors.tmp left behind"
# a file size limit (ulimit -f, SIGXFSZ ignored) makes the write fail mid-file as a full disk does, without root
( trap '' XFSZ; ulimit -f 64; ./build/export_model "$TMP/ref" "$TMP/hf_full" > "$TMP/export_full.out" 2>&1 ); rc=$?
sed 's/^/       /' "$TMP/export_full.out"
left=$(ls "$TMP/hf_full" 2> /dev/null | tr '\n' ' ')
[ $rc -eq 1 ] && grep -q "error: .*model.safetensors.tmp: write failed (File too large)" "$TMP/export_full.out" && [ -z "$left" ]
check "exit 1 naming the file; nothing left in the output directory${left:+ (found: $left)}" $?
echo "== export_model writes a new folder and moves it into place: a failure leaves no half export, a re-export never mixes two"
G="--preset tiny --dim 16 --heads 2 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1 --threads 1"   # GPT-2's vocabulary: tokenizer files too
./build/z0/train_gpt_cpu $G --steps 2 --save "$TMP/g" --save-every 1 > /dev/null 2>&1 || exit 1
ZEROC_FAIL_WRITE=tokenizer.json:last ./build/export_model "$TMP/g/ckpt_00000001" "$TMP/hf_tok" > "$TMP/hf_tok.out" 2>&1; rc=$?
[ $rc -eq 1 ] && [ ! -e "$TMP/hf_tok" ] && [ -z "$(ls -a "$TMP" | grep "^\..*\.export-")" ] && grep -q "error: .*tokenizer.json.tmp: write failed" "$TMP/hf_tok.out"
check "tokenizer.json's last write fails: exit $rc, no output folder (not model.safetensors and config.json alone), nothing temporary left" $?
./build/export_model "$TMP/g/ckpt_00000001" "$TMP/hf_gen" > /dev/null 2>&1 || exit 1
before=$(cd "$TMP/hf_gen" && sha256sum * | sha256sum)
ZEROC_FAIL_WRITE=tokenizer.json:last ./build/export_model "$TMP/g/ckpt_00000002" "$TMP/hf_gen" > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && [ "$(cd "$TMP/hf_gen" && sha256sum * | sha256sum)" = "$before" ]
check "a failed re-export of step 2 over step 1's export: exit $rc, every file still step 1's" $?
./build/export_model "$TMP/ref" "$TMP/hf_gen" > "$TMP/hf_gen.out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(ls "$TMP/hf_gen" | tr '\n' ' ')" = "config.json model.safetensors " ] && grep -q "note: .*hf_gen: removed vocab.json, merges.txt, tokenizer.json" "$TMP/hf_gen.out"
check "a re-export of a model without GPT-2's vocabulary: the old export's tokenizer files removed, with a note (exit $rc)" $?
if mount -t tmpfs -o size=$(( $(stat -c %s "$TMP/g/ckpt_00000001/model.bin") / 1024 + 256 ))k tmpfs "$TMP/mnt" 2> /dev/null; then
    ./build/export_model "$TMP/g/ckpt_00000001" "$TMP/mnt/hf" > "$TMP/hf_tmpfs.out" 2>&1; rc=$?
    left=$(ls -A "$TMP/mnt" | tr '\n' ' ')
    [ $rc -eq 1 ] && [ -z "$left" ] && grep -q "No space left on device" "$TMP/hf_tmpfs.out"
    check "a real full tmpfs (room for the model, not the tokenizer files): exit $rc, nothing left${left:+ (found: $left)}" $?
    umount "$TMP/mnt"
else
    echo "  skip the real full tmpfs (mounting needs root); the write hook above covers the same path"
fi
./build/export_model > "$TMP/usage.out" 2>&1
grep -q "usage: .*CKPT OUT_DIR \[--dtype fp32|bf16\] \[--tokenizer FILE\]" "$TMP/usage.out"
check "export_model's usage line names --tokenizer" $?
echo "== a --log file that cannot be written (/dev/full): one warning, the run goes on"
./build/z0/train_gpt_cpu $M --steps 3 --log /dev/full > "$TMP/devfull.out" 2>&1; rc=$?
grep warning "$TMP/devfull.out" | sed 's/^/       /'
[ $rc -eq 0 ] && [ "$(grep -c "warning: /dev/full: write failed (No space left on device)" "$TMP/devfull.out")" -eq 1 ]
check "exit 0 after 3 steps, one warning" $?
[ $fails -eq 0 ]
