#!/usr/bin/env bash
# Lines that say what happened (issue 34): the steps a resume runs past the schedule's horizon; the
# memory table's columns and the KV cache without a formula; Ψ a parameter count in both tables and
# why stage 3 moves less than the paper's 3Ψ; a validation set smaller than its batches; a mistyped
# path under data/brown/ once the corpus is prepared; a text file given as --train; the stop note as
# the run's last line, and what it says under mpirun; the demo's settings checked first.
cd "$(dirname "$0")/.."
source tests/lib.sh
pids=""
trap 'for p in $pids; do kill -9 $p 2> /dev/null; done; rm -rf "$TMP"' EXIT
make -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
T0=$PWD/build/z0/train_gpt_cpu
T3=$PWD/build/z3/train_gpt_cpu
make_shard "$TMP/ok.bin" 20000 250
M="--preset tiny --vocab 250 --batch 2 --seq 16 --train $TMP/ok.bin --threads 1"

echo "== a resume past the schedule's horizon names the steps it runs"
$T0 $M --quiet 1 --steps 4 --save "$TMP/h" > /dev/null || exit 1
$T0 $M --quiet 1 --steps 6 --resume "$TMP/h" --save "$TMP/h" > /dev/null 2>&1 || exit 1
$T0 $M --quiet 1 --steps 8 --resume "$TMP/h" --save "$TMP/h" > "$TMP/h.out" 2>&1
st=$?
grep -q "planned for 4 steps: steps 7-8 continue it past its end (lr [0-9.e+-]* at step 7)" "$TMP/h.out"
st=$((st + $?))
check "from step 6 with a horizon of 4: steps 7-8, not 5-8 ($(grep -o 'steps [0-9]*-[0-9]* continue' "$TMP/h.out"))" $st

echo "== the tables: columns, the KV cache, Ψ"
$MPIRUN -np 2 $T3 $M --steps 1 --sample-every 1 --sample-len 2 > "$TMP/t.out" 2>&1 || { cat "$TMP/t.out"; exit 1; }
grep "^| memory\|^| kv_cache\|^| total\|^  below" "$TMP/t.out" | sed 's/^/       /'
hdr=$(grep "^| memory " "$TMP/t.out")
[ "$(echo "$hdr" | grep -o formula | wc -l)" -eq 1 ] && echo "$hdr" | grep -q "| *expected |.*(Ψ = [0-9]* parameters, N = 2 ranks)$"
check "the memory table: one formula column, the values expected, Ψ a parameter count" $?
grep -qE "^\| kv_cache +\| +[1-9][0-9]* \| +- \| .*not in the estimate$" "$TMP/t.out"
check "the KV cache: measured, with no formula (not 0)" $?
grep -qE "^\| total .* [0-9.]+Ψ of 4-byte values \(paper: 3Ψ; Ψ = [0-9]+ parameters;" "$TMP/t.out" &&
    ! grep -q "Ψ = [0-9]* bytes" "$TMP/t.out" && grep -q "^  below 3Ψ: the paper gathers every parameter for the forward and again" "$TMP/t.out"
check "the communication table: Ψ parameters of 4-byte values, and why stage 3 is below the paper's 3Ψ" $?

echo "== validation: a set smaller than its batches says so"
$PY - "$TMP/val12.bin" <<'EOF'
import sys, numpy as np
n = 12 * 16 + 1
h = np.zeros(256, dtype=np.int32); h[:3] = [20240520, 1, n]
open(sys.argv[1], "wb").write(h.tobytes() + (np.arange(n) % 250).astype(np.uint16).tobytes())
EOF
$T0 $M --batch 4 --steps 1 --val "$TMP/val12.bin" --val-every 1 --val-batches 8 > "$TMP/v.out" 2>&1
grep "val: " "$TMP/v.out" | sed 's/^/       /'
grep -q "| 8 batches of 4 sequences every 1 steps = 32 reads of the set's 12 sequences, 20 of them repeats (--val-batches 3 reads each once)$" "$TMP/v.out"
check "8 batches of 4 from 12 sequences: the repeats said" $?

echo "== data paths"
if [ -f data/brown/train.bin ]; then
    $T0 --train data/brown/trian.bin > "$TMP/p.out" 2>&1
    [ $? -eq 1 ] && ! grep -q "make data" "$TMP/p.out" && grep -q "trian.bin: cannot open .*: the Brown corpus is prepared, as data/brown/train.bin" "$TMP/p.out"
    st=$?
    check "a typo under data/brown/ with the corpus prepared: no 'make data' ($(tail -1 "$TMP/p.out"))" $st
fi
(cd "$TMP" && $T0 --train data/brown/train.bin > p2.out 2>&1)
grep -q "cannot open .*: run \`make data\` to prepare the Brown corpus" "$TMP/p2.out"
check "data/brown/ not prepared: make data" $?
$T0 $M --train tests/lib.sh > "$TMP/m.out" 2>&1
grep -q "lib.sh: bad magic number .*(text becomes one with scripts/prepare_data.sh --input tests/lib.sh --out PREFIX)" "$TMP/m.out"
st=$?
check "a text file as --train: prepare_data named ($(tail -1 "$TMP/m.out" | cut -c1-90)...)" $st

echo "== the stop note: the last line; under mpirun, what a Ctrl-C is"
$T0 $M --steps 1000000 --lr-schedule constant --log "$TMP/s.jsonl" > "$TMP/s.out" 2>&1 &
run=$!; pids="$run"
wait_train_steps "$TMP/s.jsonl" 3 $run
kill -TERM $run; wait $run; rc=$?
tail -1 "$TMP/s.out" | sed 's/^/       /'
[ $rc -eq 75 ] && tail -1 "$TMP/s.out" | grep -q "^note: stopped by SIGTERM after step [0-9]* of 1000000: nothing saved (no --save); exit status 75$"
check "one process: the stop note is the last line" $?
$MPIRUN --mca odls_base_sigkill_timeout 10 -np 2 $T0 $M --quiet 1 --steps 1000000 --lr-schedule constant --log "$TMP/r.jsonl" > "$TMP/r.out" 2>&1 &
run=$!; pids="$run"
wait_train_steps "$TMP/r.jsonl" 3 $run
kill -INT $run; wait $run
grep "stopped by" "$TMP/r.out" | sed 's/^/       /'
grep -q "note: stopped by SIGTERM after step [0-9]* .*(mpirun passes a Ctrl-C, or a SIGTERM to itself, to the ranks as SIGTERM)$" "$TMP/r.out"
check "Ctrl-C to mpirun: the note says mpirun passed it on as SIGTERM" $?
echo "== the demo: its expected time first; out/demo.png with a title and the unigram baseline"
for e in STEPS=abc NP=0 ZERO=5; do   # said before anything runs: no traceback, no build of a stage 5
    OUT="$TMP/demo_bad" env $e bash scripts/demo.sh > "$TMP/bad.out" 2>&1; st=$?
    [ $st -eq 2 ] && [ "$(wc -l < "$TMP/bad.out")" -eq 1 ] && grep -q "^error: make demo $e: expected " "$TMP/bad.out"
    check "make demo $e: one line naming it, exit $st ($(head -1 "$TMP/bad.out"))" $?
done
if nvidia-smi -L > /dev/null 2>&1; then
    echo "  (a GPU is here: the demo trains GPT-2 124M; not run)"
else
    OUT="$TMP/demo" STEPS=2 NP=1 ZERO=0 bash scripts/demo.sh > "$TMP/demo.out" 2>&1; st=$?
    head -1 "$TMP/demo.out" | sed 's/^/       /'
    [ $st -eq 0 ] && head -1 "$TMP/demo.out" | grep -q "^demo: expected training time: about [0-9.]* \(s\|min\) on [0-9]* idle cores (bench/demo_time.txt, .*the load average now is [0-9.]* on [0-9]* cores, so about [0-9.]* \(s\|min\) at"
    check "the demo says its expected time and the load before anything else" $?
    u=$(sed -n 's/.*(unigram of the train data) give \([0-9.]*\) on val.*/\1/p' "$TMP/demo.out")
    $PY - "$TMP/demo/demo.png" "$u" <<'EOF'
import sys, zlib
data, want = open(sys.argv[1], "rb").read(), sys.argv[2]
meta, pos = {}, 8
while pos < len(data):   # the PNG's tEXt and zTXt chunks
    n, kind = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
    body = data[pos + 8:pos + 8 + n]
    if kind == b"tEXt":
        k, _, v = body.partition(b"\0"); meta[k.decode()] = v.decode("latin-1")
    elif kind == b"zTXt":
        k, _, v = body.partition(b"\0"); meta[k.decode()] = zlib.decompress(v[1:]).decode("latin-1")
    pos += 12 + n
print("       demo.png: Title %r, Description %r" % (meta.get("Title"), meta.get("Description")))
ok = meta.get("Title", "").startswith("zeroc CPU demo: llama mini, 1 rank, ZeRO-0, 2 steps") and \
     want and meta.get("Description", "").startswith("word frequencies alone (unigram), val: %.2f" % float(want))
sys.exit(0 if ok else 1)
EOF
    check "out/demo.png has the demo's title and draws the unigram baseline ($u) it is compared with" $?
fi
[ $fails -eq 0 ]
