#!/usr/bin/env bash
# The --log JSONL of a resumed run holds each step once: what an earlier run wrote after the
# checkpoint's step is cut, with a note, as the TensorBoard and CSV monitors are cut
# (docs/checkpoints.md). Run A trains 6 steps with checkpoints at 3 and 6; run B resumes from step 3
# into the same log (A's steps 4-6 are what a kill after step 6 leaves behind), and a torn last line
# (a kill mid-write) goes too.
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu || exit 1
T0=$PWD/build/z0/train_gpt_cpu
cd "$TMP"
make_shard ok.bin 20000 250
M="--preset tiny --vocab 250 --batch 2 --seq 16 --quiet 1 --train ok.bin --val ok.bin --val-every 2 --val-batches 1 --steps 6"
$T0 $M --save D --save-every 3 --log L.jsonl > a.out 2>&1 || { cat a.out; exit 1; }
cp L.jsonl A.jsonl
$T0 $M --save D --resume D/ckpt_00000003 --log L.jsonl > b.out 2>&1; st_b=$?
sed 's/^/    /' b.out
$PY - <<'EOF'
import json, sys
def steps(path, kind):
    return [(r["step"], r.get("loss", r.get("val_loss"))) for r in map(json.loads, open(path)) if r["type"] == kind]
for kind in ("train", "val"):
    a, b = steps("A.jsonl", kind), steps("L.jsonl", kind)
    if [s for s, _ in b] != sorted({s for s, _ in b}) or b != a:
        sys.exit(f"{kind}: resumed log {b} is not the unbroken run's {a}")
print("  each train and val step once, with the unbroken run's values")
EOF
check "a resumed run's log: steps 1-6 once each, equal to the unbroken run's" $?
[ $st_b -eq 0 ] && grep -q "^note: L.jsonl: 7 records of an earlier run after step 3 removed: this run continues from there$" b.out
check "the cut is said in one note (7 records after step 3)" $?

# a torn last line: cut with the rest after the checkpoint, so that the next record starts a line
printf '{"type":"train","st' >> L.jsonl
$T0 $M --save D --resume D/ckpt_00000006 --steps 7 --log L.jsonl > c.out 2>&1; st=$?
[ $st -eq 0 ] && $PY -c "import json; [json.loads(l) for l in open('L.jsonl')]" &&
    grep -q "^note: L.jsonl: 1 record of an earlier run after step 6 removed" c.out
st=$?
check "a torn last line is cut, and every line parses ($(grep note: c.out | grep L.jsonl))" $st
[ $fails -eq 0 ]
