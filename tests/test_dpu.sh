#!/usr/bin/env bash
# ZeRO-Offload's delayed parameter update (DPU, zero/dpu.h) and Twin-Flow on the CPU trainer:
#   1. its losses equal the PyTorch reference's delayed update (scripts/train_gpt.py --offload-dpu 1)
#      to float rounding at stages 0-3, 1 to 4 ranks (gpt2; llama at stage 3 with accumulation), clipping
#      and the lr schedule on, while DPU off
#      differs by far more (so the comparison can fail)
#   2. a skipped step (--inject-nonfinite) installs the pending update and starts none: the reference
#      skipping the same step (--skip-steps) computes the same losses
#   3. a resume from a checkpoint of a DPU run is bitwise the run that saved it; with hpZ, validation
#      and a sample before the save change nothing
#   4. DPU's buffers are in the memory report; bad combinations are one error line; --sub-group-size
#      alone says it does nothing; the communication report holds a step that shared parameters
#   5. Twin-Flow (--offload-ratio, stage 3): bitwise the numbers of ratio 1; each side counted, by
#      DeepSpeed's rule: sub-groups i >= int((1 - ratio) * n) on CPU-Adam's side
cd "$(dirname "$0")/.."
source tests/lib.sh
if ! $PY -c "import torch" 2>/dev/null; then echo "skip: $PY cannot import torch"; exit 77; fi
make -s build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
make_shard "$TMP/train.bin" 50000 250
M="--arch gpt2 --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 16 --train $TMP/train.bin --steps 12
   --quiet 1 --threads 1 --lr 1e-2 --warmup 2 --offload-dpu 1 --dpu-warmup 3"
STAGES=${DPU_STAGES:-"1:1 3:4 2:4 0:2"}   # stage:ranks; DPU_STAGES="0:1 0:4 1:1 1:4 2:1 2:4 3:1 3:4" for all eight

# maxdiff A.jsonl B.jsonl: the max |loss difference| over their train records (same count required)
maxdiff() {
    $PY - "$1" "$2" <<'PYEOF'
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in sys.argv[1:3])
print("%.3g" % (max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) and a else 1e9))
PYEOF
}
ok() { $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) $2 else 1)" "$1"; }

echo "== 1. DPU against the PyTorch reference of the delayed update (warm-up 3: delayed from update 4 on)"
$PY scripts/train_gpt.py $M --batch 4 --log "$TMP/py_dpu.jsonl" > "$TMP/py.out" 2>&1 || { cat "$TMP/py.out"; exit 1; }
$PY scripts/train_gpt.py $M --batch 4 --offload-dpu 0 --log "$TMP/py_plain.jsonl" > /dev/null 2>&1 || exit 1
far=$(maxdiff "$TMP/py_dpu.jsonl" "$TMP/py_plain.jsonl")
for sr in $STAGES; do
    s=${sr%:*}; n=${sr#*:}
    $MPIRUN -np $n build/z$s/train_gpt_cpu $M --batch $((4 / n)) --log "$TMP/c_${s}_$n.jsonl" > "$TMP/c.out" 2>&1 || { cat "$TMP/c.out"; exit 1; }
    d=$(maxdiff "$TMP/c_${s}_$n.jsonl" "$TMP/py_dpu.jsonl")
    ok "$d" "< 2e-5"; check "stage $s, $n rank(s): max |loss - reference| $d over 12 steps (DPU off differs by $far)" $?
done
ok "$far" "> 1e-3"; check "the reference's delay changes the losses ($far): the comparison can fail" $?
L="${M/--arch gpt2/--arch llama} --kv-heads 2 --accum 2"
$PY scripts/train_gpt.py $L --batch 2 --log "$TMP/py_llama.jsonl" > /dev/null 2>&1 || exit 1
$MPIRUN -np 2 build/z3/train_gpt_cpu $L --batch 1 --log "$TMP/c_llama.jsonl" > "$TMP/c.out" 2>&1 || { cat "$TMP/c.out"; exit 1; }
d=$(maxdiff "$TMP/c_llama.jsonl" "$TMP/py_llama.jsonl")
ok "$d" "< 2e-5"; check "llama, stage 3, 2 ranks, accumulation 2: max |loss - reference| $d" $?

echo "== 2. a skipped step with DPU: the pending update lands, none starts"
$MPIRUN -np 2 build/z2/train_gpt_cpu $M --batch 2 --inject-nonfinite 7:1 --log "$TMP/c_skip.jsonl" > "$TMP/c.out" 2>&1 || { cat "$TMP/c.out"; exit 1; }
$PY scripts/train_gpt.py $M --batch 4 --skip-steps 7 --log "$TMP/py_skip.jsonl" > /dev/null 2>&1 || exit 1
d=$(maxdiff "$TMP/c_skip.jsonl" "$TMP/py_skip.jsonl"); dn=$(maxdiff "$TMP/c_skip.jsonl" "$TMP/py_dpu.jsonl")
grep -q '"skipped"' "$TMP/c_skip.jsonl" || grep -q 'SKIPPED' "$TMP/c.out"; st=$?
ok "$d" "< 2e-5" && [ $st -eq 0 ] && ok "$dn" "> 1e-4"
check "step 7 skipped: max |loss - reference skipping it| $d (against the unskipped reference $dn)" $?

echo "== 3. resume: a checkpoint holds the pending update applied; the resumed run is bitwise the saving one"
R="$M --batch 2 --save-every 6"
$MPIRUN -np 2 build/z3/train_gpt_cpu $R --save "$TMP/ck" --log "$TMP/full.jsonl" > /dev/null 2>&1 || exit 1
$MPIRUN -np 2 build/z3/train_gpt_cpu $R --resume "$TMP/ck/ckpt_00000006" --save "$TMP/ck2" --log "$TMP/resumed.jsonl" > /dev/null 2>&1 || exit 1
a=$(grep '"type":"train"' "$TMP/full.jsonl" | sed -n '7,12p' | grep -o '"loss":[^,]*')
b=$(grep '"type":"train"' "$TMP/resumed.jsonl" | grep -o '"loss":[^,]*')
[ -n "$a" ] && [ "$a" = "$b" ] && cmp -s "$TMP/ck/ckpt_00000012/model.bin" "$TMP/ck2/ckpt_00000012/model.bin" &&
    cmp -s "$TMP/ck/ckpt_00000012/optim_rank_00001.bin" "$TMP/ck2/ckpt_00000012/optim_rank_00001.bin"
check "steps 7-12 after --resume: 6 losses, model.bin and optimizer state bitwise identical" $?
# the save's install changes the shard after validation and sampling gathered: hpZ's parts go stale
make_shard "$TMP/val.bin" 5000 250 1
H="$R --zero-hpz-partition-size 2 --persistence-threshold 0 --val $TMP/val.bin --val-batches 1 --sample-len 4"
$MPIRUN -np 2 build/z3/train_gpt_cpu $H --save "$TMP/ckh" --val-every 6 --sample-every 6 --log "$TMP/hv.jsonl" > "$TMP/c.out" 2>&1 || { cat "$TMP/c.out"; exit 1; }
$MPIRUN -np 2 build/z3/train_gpt_cpu $H --save "$TMP/ckh2" --log "$TMP/h.jsonl" > "$TMP/c.out" 2>&1 || { cat "$TMP/c.out"; exit 1; }
a=$(grep '"type":"train"' "$TMP/hv.jsonl" | grep -o '"loss":[^,]*'); b=$(grep '"type":"train"' "$TMP/h.jsonl" | grep -o '"loss":[^,]*')
[ -n "$a" ] && [ "$a" = "$b" ]
check "hpZ: validation and a sample before step 6's save leave the 12 losses bitwise those of the save alone" $?

echo "== 4. the memory report and bad combinations"
build/z3/train_gpt_cpu $M --batch 4 --steps 1 --quiet 0 > "$TMP/mem.out" 2>&1
grep -qi "dpu" "$TMP/mem.out"; check "the start-up memory report names DPU's copies" $?
build/z3/train_gpt_cpu $M --batch 4 --estimate-memory 4 --log "$TMP/est.jsonl" > /dev/null 2>&1
$PY - "$TMP/est.jsonl" <<'PYEOF'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])][-1]
c, g = e["train_gpt_cpu"]["stage3"], e["train_gpt"]["stage3"]
# the CPU trainer's copies in its memory; train_gpt's (offload: --offload-dpu needs it) in pinned host memory
sys.exit(0 if c["dpu_copies"] > 0 and c["host"]["dpu_copies"] == 0 and g["dpu_copies"] > 0 else 1)
PYEOF
check "--estimate-memory counts DPU's copies" $?
expect_error "--offload-dpu with NVMe offload" "offload-dpu.*NVMe" 1 build/z1/train_gpt_cpu $M --batch 4 --offload-nvme "$TMP"
build/z3/train_gpt_cpu $M --batch 4 --steps 0 --sub-group-size 4000 > "$TMP/sg.out" 2>&1
echo '{"zero_optimization": {"stage": 3, "sub_group_size": 1e9}}' > "$TMP/sg.json"
build/z3/train_gpt_cpu $M --batch 4 --steps 0 --config "$TMP/sg.json" >> "$TMP/sg.out" 2>&1
grep -q "^note: --sub-group-size: no effect without Twin-Flow's split" "$TMP/sg.out" &&
    grep -q "^note: .*sg.json: zero_optimization.sub_group_size: no effect without Twin-Flow's split" "$TMP/sg.out"
check "--sub-group-size and sub_group_size without a ratio below 1 say they have no effect" $?
# the communication report: the last step that updated; a first delayed step installs nothing
$MPIRUN -np 2 build/z2/train_gpt_cpu $M --batch 2 --steps 4 --log "$TMP/comm.jsonl" > /dev/null 2>&1 || exit 1
$PY - "$TMP/comm.jsonl" <<'PYEOF'
import json, sys
c = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "comm"][-1]
got, want = c["bytes_per_step"]["all_gather"], c["theory_bytes_per_step"]["all_gather"]
print("       stage 2, 4 steps, the last the first delayed one: all-gather %d bytes, theory %d" % (got, want))
sys.exit(0 if got == want > 0 else 1)
PYEOF
check "the communication report counts a step's all-gather when the last step installed none" $?

echo "== 5. Twin-Flow: the split is counted, the numbers are those of ratio 1"
T="$M --batch 2 --offload-dpu 0 --sub-group-size 4000"
$MPIRUN -np 2 build/z3/train_gpt_cpu $T --save "$TMP/tw1" --log "$TMP/tw1.jsonl" > /dev/null 2>&1 || exit 1
$MPIRUN -np 2 build/z3/train_gpt_cpu $T --offload-ratio 0.5 --save "$TMP/tw5" --log "$TMP/tw5.jsonl" > "$TMP/tw5.out" 2>&1 || exit 1
a=$(grep '"type":"train"' "$TMP/tw1.jsonl" | grep -o '"loss":[^,]*'); b=$(grep '"type":"train"' "$TMP/tw5.jsonl" | grep -o '"loss":[^,]*')
[ -n "$a" ] && [ "$a" = "$b" ] && cmp -s "$TMP/tw1/ckpt_00000012/model.bin" "$TMP/tw5/ckpt_00000012/model.bin" &&
    cmp -s "$TMP/tw1/ckpt_00000012/optim_rank_00000.bin" "$TMP/tw5/ckpt_00000012/optim_rank_00000.bin"
check "--offload-ratio 0.5: 12 losses, model.bin and optimizer state bitwise those of ratio 1" $?
for ratio in 0.5 0.25 0; do
    build/z3/train_gpt_cpu $T --quiet 0 --steps 0 --offload-ratio $ratio --log "$TMP/twm.jsonl" > "$TMP/twm.out" 2>&1 || exit 1
    $PY - "$TMP/twm.jsonl" $ratio "$TMP/twm.out" <<'PYEOF'
import json, re, sys
mem = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "memory"][0]
tw, ratio = mem["twin_flow"], float(sys.argv[2])
line = [l for l in open(sys.argv[3]) if l.startswith("Twin-Flow")][0]
host_off, shard = map(int, re.search(r"\[(\d+), (\d+)\) on CPU-Adam", line).groups())
n, first = tw["sub_groups"], int((1 - ratio) * tw["sub_groups"])
dev, host = tw["device_side_optimizer_bytes"], tw["cpu_adam_side_optimizer_bytes"]
# DeepSpeed's rule worked out here, from the model's tensors in shard order (model/model.h's units, each
# padded to 16 at one rank): groups closed at 4000 elements, CPU-Adam from group int((1 - ratio) * n)
C, F, Vp, T = 48, 100, 256, 32
units = [[Vp * C, T * C]] + [[C, C, 3 * C * C, 3 * C, C * C, C, C, C, F * C, F, C * F, C]] * 2 + [[C, C]]
segs, off = [], 0
for u in units:
    segs += [(off + sum(u[:i]), x) for i, x in enumerate(u)]
    off += -(-sum(u) // 16) * 16
starts, acc = [0], 0
for i, (o, x) in enumerate(segs):
    acc += x
    if acc >= 4000 or i == len(segs) - 1:
        acc = 0
        if i + 1 < len(segs): starts.append(segs[i + 1][0])
k = int((1 - ratio) * len(starts))
want = 0 if k <= 0 else off if k >= len(starts) else starts[k]
ok = dev + host == mem["measured_bytes"]["optimizer"] and dev == 8 * host_off and host_off == want and n == len(starts) and shard == off
print("       ratio %g: %d sub-groups, CPU-Adam from group %d at shard offset %d (the rule worked out here: %d): device side %d bytes, "
      "CPU-Adam's %d" % (ratio, n, first, host_off, want, dev, host))
sys.exit(0 if ok and n > 2 else 1)
PYEOF
    check "ratio $ratio: each side's optimizer bytes in the memory report" $?
done
build/z3/train_gpt_cpu $T --estimate-memory 4 --offload 1 --offload-ratio 0.5 --log "$TMP/twe.jsonl" > /dev/null 2>&1
build/z3/train_gpt_cpu $T --estimate-memory 4 --offload 1 --log "$TMP/twe1.jsonl" > /dev/null 2>&1
$PY - "$TMP/twe.jsonl" "$TMP/twe1.jsonl" <<'PYEOF'
import json, sys
a, b = (list(map(json.loads, open(p)))[-1]["train_gpt"]["stage3"] for p in sys.argv[1:])
moved = b["host"]["optimizer"] - a["host"]["optimizer"]
print("       train_gpt, stage 3: %d bytes of optimizer state move from host (pinned) to the device at ratio 0.5" % moved)
sys.exit(0 if moved > 0 and a["total"] - b["total"] == moved and a["optimizer"] == b["optimizer"] else 1)
PYEOF
check "--estimate-memory: train_gpt's stage-3 row puts the device side in device memory" $?
[ $fails -eq 0 ]
