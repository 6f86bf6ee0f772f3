#!/usr/bin/env bash
# ZeRO++ at stage 3 (zero.h's ZeRO++ section; docs/zero.md), on the CPU trainer, with
# ZEROC_RANKS_PER_NODE (test-only) making blocks of 2 ranks one "node":
#   1. counted traffic: at 2 nodes x 2 ranks, plain ZeRO-3, each component alone and all
#      three; at 3 nodes x 2 ranks, plain and all three. Every collective's intra-node and
#      cross-node bytes equal the plan's formula exactly (padding and the block scales
#      included, train/zero_report.h), and all three cut the cross-node bytes by at least 4x
#      (the paper's 3M -> 0.75M; more here, the CPU communicating fp32). hpZ as DeepSpeed: the cross-node
#      gather bytes per step the same at --accum 1 and 4; groups of 4 over nodes of 2; with qwZ its gathers are int8.
#      qgZ on one node of 4 reduce-scatters plainly: bitwise ZeRO-3.
#   2. losses: hpZ alone moves the same values, so its losses equal plain ZeRO-3 bitwise;
#      qwZ, qgZ and all three stay within 0.02 of plain ZeRO-3's losses over 4 steps (measured
#      about 5e-3 at this size); each step logs the relative RMS error of what qwZ and qgZ
#      quantized, and it moves from step to step.
#   3. checkpoints hold the primary partition: a ZeRO++ run's checkpoint resumes at 2 ranks
#      on stage 1; fp16 with an injected overflow skips that step and goes on; the estimator
#      counts hpZ's secondary partition; bad settings get one line; qwZ and hpZ say when every
#      unit is persistent, so that they have no gather to act on.
#   4. scripts/quant_compare.py on the run's checkpoint: zeroc's quantizer beside DeepSpeed's arrangement,
#      zeroc's int8 blocks erring less than DeepSpeed's groups of ~8,000 (needs torch; a note without).
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z1/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
make_shard "$TMP/train.bin" 40000 250
M="--preset tiny --dim 64 --heads 2 --vocab 250 --seq 32 --batch 2 --accum 2 --train $TMP/train.bin --threads 1 --quiet 1 --persistence-threshold 0"
ALL="--zero-quantized-weights 1 --zero-hpz-partition-size 2 --zero-quantized-gradients 1"
export TMP

run() {   # run NAME NP STAGE ARGS...: JSONL in $TMP/NAME.jsonl, output in $TMP/NAME.out
    local name=$1 np=$2 stage=$3; shift 3
    ZEROC_RANKS_PER_NODE=${RPN:-2} timeout 120 $MPIRUN -np "$np" ./build/z$stage/train_gpt_cpu $M "$@" --log "$TMP/$name.jsonl" \
        > "$TMP/$name.out" 2>&1
    echo $? > "$TMP/$name.rc"
}

echo "== 1. counted intra- and cross-node bytes against the formulas"
run n2_plain 4 3 --steps 4
run n2_qw 4 3 --steps 4 --zero-quantized-weights 1
run n2_hpz 4 3 --steps 4 --zero-hpz-partition-size 2
run n2_qg 4 3 --steps 4 --zero-quantized-gradients 1
run n2_all 4 3 --steps 4 $ALL --save "$TMP/ck"
RPN=4 run n1_qg 4 3 --steps 4 --zero-quantized-gradients 1
run n2_hpz_k1 4 3 --steps 2 --accum 1 --zero-hpz-partition-size 2
run n2_hpz_k4 4 3 --steps 2 --accum 4 --zero-hpz-partition-size 2
run n2_plain_k4 4 3 --steps 2 --accum 4
run n2_hpz4 4 3 --steps 4 --zero-hpz-partition-size 4
run n2_qwhpz_k4 4 3 --steps 2 --accum 4 --zero-quantized-weights 1 --zero-hpz-partition-size 2
run n3_plain 6 3 --steps 2
run n3_all 6 3 --steps 2 $ALL
$PY - <<'PYEOF'
import json, os
T = os.environ["TMP"]
def recs(name, kind):
    return [json.loads(l) for l in open(f"{T}/{name}.jsonl") if f'"type":"{kind}"' in l]
fails = 0
def check(ok, what):
    global fails
    print(("  ok   " if ok else "  FAIL ") + what); fails += not ok
for name in ["n2_plain", "n2_qw", "n2_hpz", "n2_qg", "n2_all", "n1_qg", "n2_hpz_k1", "n2_hpz_k4", "n2_plain_k4", "n2_hpz4",
             "n2_qwhpz_k4", "n3_plain", "n3_all"]:
    if int(open(f"{T}/{name}.rc").read()) != 0:
        check(False, f"{name} ran (exit {open(f'{T}/{name}.rc').read().strip()})"); print(open(f"{T}/{name}.out").read()[-800:]); continue
    c = recs(name, "comm")[0]
    bad = [f"{where} {k}: counted {c[f'{where}_node_bytes_per_step'][k]} != formula {c[f'theory_{where}_node_bytes_per_step'][k]}"
           for where in ("intra", "cross") for k in c["bytes_per_step"]
           if c[f"{where}_node_bytes_per_step"][k] != c[f"theory_{where}_node_bytes_per_step"][k]]
    check(not bad and c["cross_node_total_bytes"] == c["theory_cross_node_total_bytes"],
          f"{name} ({c['nodes']} nodes x {c['ranks_per_node']}): cross-node {c['cross_node_total_bytes']:.0f} B, intra-node "
          f"{c['intra_node_total_bytes']:.0f} B per step, every collective as the formula" + ("; " + "; ".join(bad) if bad else ""))
for n in ("n2", "n3"):
    try:
        plain, allp = recs(f"{n}_plain", "comm")[0], recs(f"{n}_all", "comm")[0]
        r = plain["cross_node_total_bytes"] / allp["cross_node_total_bytes"]
        check(r >= 4, f"{n}: all three cut the cross-node bytes {r:.2f}x (plain {plain['cross_node_total_bytes']:.0f}, "
              f"ZeRO++ {allp['cross_node_total_bytes']:.0f})")
        q, p0 = allp["bytes_per_step"], plain["bytes_per_step"]
        check(q["all_to_all"] > 0 and q["reduce_scatter"] < p0["reduce_scatter"] / 50,
              f"{n}: qgZ replaced the reduce-scatter by all-to-alls but for the units of 1-D tensors, as DeepSpeed "
              f"({q['reduce_scatter']:.0f} B of {p0['reduce_scatter']:.0f} still reduce-scattered)")
    except Exception as e:
        check(False, f"{n}: comm records ({e})")

try:   # hpZ as DeepSpeed: a unit crosses nodes once per step, however many micro-steps
    ag = lambda n: recs(n, "comm")[0]["cross_node_bytes_per_step"]["all_gather"]
    check(ag("n2_hpz_k4") == ag("n2_hpz_k1") > 0 and ag("n2_plain_k4") > 3 * ag("n2_hpz_k4"),
          f"hpZ: cross-node gather bytes per step {ag('n2_hpz_k1'):.0f} at --accum 1, {ag('n2_hpz_k4'):.0f} at --accum 4 "
          f"(plain ZeRO-3 at --accum 4: {ag('n2_plain_k4'):.0f})")
    g = recs("n2_qwhpz_k4", "comm")[0]
    check(g["intra_node_bytes_per_step"]["all_gather"] < 0.3 * recs("n2_hpz_k4", "comm")[0]["intra_node_bytes_per_step"]["all_gather"],
          f"qwZ + hpZ: the group's gathers are int8 too: {g['intra_node_bytes_per_step']['all_gather']:.0f} B inside the node, "
          f"fp32 would be {recs('n2_hpz_k4', 'comm')[0]['intra_node_bytes_per_step']['all_gather']:.0f}")
    c4 = recs("n2_hpz4", "comm")[0]
    check(c4["intra_node_total_bytes"] == 0, "hpZ over a group of 4 on nodes of 2: its gathers count as crossing nodes")
except Exception as e:
    check(False, f"hpZ's lifecycle ({e})")
for n in ("n2_plain", "n2_all"):
    c = recs(n, "comm")[0]
    print(f"  {n}: the paper's cross-node count per iteration {c['paper_cross_node_m']:.2f}M (M = 2 bytes x Ψ = "
          f"{c['paper_m_bytes']:.0f} B); zeroc counted {c['cross_node_m']:.3f}M per step of 2 micro-steps, fp32")
check(recs("n2_plain", "comm")[0]["paper_cross_node_m"] == 3 and recs("n2_all", "comm")[0]["paper_cross_node_m"] == 0.75,
      "the paper's counts as it defines them: 3M and 0.75M")

print("== 2. losses against plain ZeRO-3")
def losses(name): return [r["loss"] for r in recs(name, "train")]
try:
    base = losses("n2_plain")
    check(losses("n2_hpz") == base and len(base) == 4, f"hpZ alone: losses bitwise equal to ZeRO-3's ({len(base)} steps)")
    check(losses("n2_hpz4") == base, "hpZ over groups of 4 (the world, spanning both nodes): bitwise equal too")
    for name in ("n2_qw", "n2_qg", "n2_all"):
        d = max(abs(a - b) for a, b in zip(losses(name), base))
        check(len(losses(name)) == 4 and d < 0.02, f"{name}: max |loss - ZeRO-3's| {d:.2e} < 0.02")
    tr = recs("n2_all", "train")
    e8 = [r["qwz_rel_rms_error"] for r in tr]; e4 = [r["qgz_rel_rms_error"] for r in tr]
    check(0 < min(e8) and max(e8) < 0.02 and 0.02 < min(e4) and max(e4) < 0.3 and len(set(e8)) > 1 and len(set(e4)) > 1,
          f"the relative RMS error of what was quantized, logged every step, moves: int8 {min(e8):.5f}..{max(e8):.5f}, "
          f"int4 {min(e4):.4f}..{max(e4):.4f}")
    check(losses("n1_qg") == base and recs("n1_qg", "comm")[0]["bytes_per_step"]["all_to_all"] == 0,
          "qgZ on one node of 4: the plain reduce-scatter, as DeepSpeed; losses bitwise equal to ZeRO-3's")
    check(all("qgz_rel_rms_error" not in r for r in recs("n2_qw", "train")), "qwZ alone logs no qgZ error")
except Exception as e:
    check(False, f"losses ({e})")
open(f"{T}/py_fails", "w").write(str(fails))
PYEOF
fails=$((fails + $(cat "$TMP/py_fails" 2>/dev/null || echo 1)))

echo "== 3. checkpoints, fp16 and skipped steps, the estimator, bad settings"
run resume 2 1 --steps 6 --accum 4 --resume "$TMP/ck" --lr-total-steps 6
st=$(cat "$TMP/resume.rc"); [ "$st" = 0 ] && [ "$(grep -c '"type":"train"' "$TMP/resume.jsonl")" = 2 ]
check "a ZeRO++ checkpoint (2 nodes x 2, stage 3) resumes at 2 ranks, stage 1: steps 5-6" $?
[ "$st" = 0 ] || tail -3 "$TMP/resume.out"
run fp16 4 3 --steps 4 $ALL --fp16 1 --inject-nonfinite 2:1:inf --max-skips 2
grep '"type":"train"' "$TMP/fp16.jsonl" | grep -q '"step":2,.*"skipped":true' && [ "$(cat "$TMP/fp16.rc")" = 0 ] \
    && [ "$(grep -c '"skipped":false' "$TMP/fp16.jsonl")" = 3 ]
check "fp16 with all three: the injected overflow skips step 2, the other 3 steps apply" $?
est() { ./build/z3/train_gpt_cpu $M --estimate-memory 4 --log "$TMP/$1.jsonl" "${@:2}" > /dev/null 2>&1
        grep '"type":"estimate"' "$TMP/$1.jsonl" | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["train_gpt_cpu"]["stage3"]["gathered_params"]))'; }
a=$(est est0); b=$(est est1 --zero-hpz-partition-size 2)
sec=$(grep -m1 '"type":"memory"' "$TMP/n2_hpz.jsonl" | $PY -c 'import json,sys; r=json.load(sys.stdin); print(int(r["measured_bytes"]["gathered_params"] - r["formula_bytes"]["gathered_params"]))')
m0=$(grep -m1 '"type":"memory"' "$TMP/n2_plain.jsonl" | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["measured_bytes"]["gathered_params"]))')
m1=$(grep -m1 '"type":"memory"' "$TMP/n2_hpz.jsonl" | $PY -c 'import json,sys; print(int(json.load(sys.stdin)["measured_bytes"]["gathered_params"]))')
[ -n "$a" ] && [ "$((b - a))" -gt 0 ] && [ "$((b - a))" = "$((m1 - m0))" ] && [ "$sec" = 0 ]
check "--estimate-memory counts hpZ's secondary partition: +$((b - a)) bytes at 4 ranks, as the run measured ($((m1 - m0)))" $?
expect_error "hpZ partition size against the world" "zero_hpz_partition_size 3 .*must divide the world of 4" 4 \
    env ZEROC_RANKS_PER_NODE=2 $MPIRUN -np 4 ./build/z3/train_gpt_cpu $M --steps 1 --zero-hpz-partition-size 3
expect_error "the test-only node override" "ZEROC_RANKS_PER_NODE=3" 4 \
    env ZEROC_RANKS_PER_NODE=3 $MPIRUN -np 4 ./build/z3/train_gpt_cpu $M --steps 1
./build/z1/train_gpt_cpu $M --steps 1 --zero-quantized-weights 1 > "$TMP/z1.out" 2>&1
st=$?; grep -q "zero-quantized-weights.*no effect.*stage 1" "$TMP/z1.out"
check "stage 1: the ZeRO++ flags have no effect, said in one line (exit $st)" $?
# every unit under the persistence threshold: qwZ and hpZ have no gather to act on, and say so
ZEROC_RANKS_PER_NODE=2 $MPIRUN -np 4 ./build/z3/train_gpt_cpu $M --steps 1 --persistence-threshold 100000 \
    --zero-quantized-weights 1 --zero-hpz-partition-size 2 > "$TMP/allpers.out" 2>&1
st=$?; [ $st -eq 0 ] && [ "$(grep -c "no parameter is gathered: they quantize and keep nothing" "$TMP/allpers.out")" -eq 1 ]
check "every unit persistent: qwZ and hpZ say in one line that they have nothing to do (exit $st)" $?
echo "== 4. scripts/quant_compare.py: zeroc's quantizer beside DeepSpeed's on the run's weights and gradients"
if $PY -c "import torch, numpy" 2> /dev/null; then
    ck=$(ls -d "$TMP"/ck/ckpt_* | tail -1)
    nice $PY scripts/quant_compare.py --preset tiny --dim 64 --heads 2 --vocab 250 --seq 32 --batch 2 --train "$TMP/train.bin" \
        --init "$ck/model.bin" > "$TMP/qc.out" 2>&1
    st=$?
    $PY - "$TMP/qc.out" <<'PYEOF'
import sys
rows = {l.split("|")[1].strip(): [float(x) for x in l.split("|")[2:4]] for l in open(sys.argv[1]) if l.startswith("| q")}
w, g = rows.get("qwZ, the gathered weights (int8)"), rows.get("qgZ, the reduced gradient (int4, 2 hops)")
ok = w and g and 0 < w[0] < w[1] < 0.05 and 0 < g[0] < 0.5 and 0 < g[1] < 0.5
print(("  ok   " if ok else "  FAIL ") + f"relative RMS errors, zeroc and DeepSpeed: qwZ {w}, qgZ {g} (zeroc's 256-value int8 blocks beat ~8,000-value groups)")
sys.exit(0 if ok else 1)
PYEOF
    [ $? -eq 0 ] && [ $st -eq 0 ] || { fails=$((fails + 1)); tail -5 "$TMP/qc.out"; }
else
    echo "  note: $PY cannot import torch and numpy: scripts/quant_compare.py not run"
fi
exit $((fails > 0))
