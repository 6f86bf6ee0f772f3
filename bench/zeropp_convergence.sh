#!/usr/bin/env bash
# bench/zeropp_convergence.sh: what ZeRO++'s quantization costs in convergence. The demo model
# (scripts/demo.sh's CPU run: llama preset mini, 4 ranks, global batch 32 x 64 tokens, lr 5e-3,
# 300 steps on the Brown data) trained twice at ZeRO stage 3, plain and with all three ZeRO++
# components (qwZ, hpZ, qgZ), on 2 "nodes" of 2 ranks (ZEROC_RANKS_PER_NODE=2, test-only: one
# machine, so the nodes are simulated and nothing here is timed). Prints the max and mean |loss
# difference| per step, the validation losses, the worst block errors the log reports, and the
# cross-node bytes per step; plots both curves (scripts/plot_losses.py). Writes
# bench/zeropp_convergence.txt and bench/zeropp_convergence.png.
#   bash bench/zeropp_convergence.sh            (STEPS=300 NP=4 RANKS_PER_NODE=2)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
STEPS=${STEPS:-300}
NP=${NP:-4}
RPN=${RANKS_PER_NODE:-2}
[ -f data/brown/train.bin ] || bash scripts/prepare_data.sh
make -s build/z3/train_gpt_cpu
bench_init zeropp_convergence
bench_header "ZeRO++ convergence: the demo model, plain ZeRO-3 against qwZ + hpZ + qgZ, $STEPS steps, $NP ranks as $((NP / RPN)) nodes of $RPN"
ZPP="--zero-quantized-weights 1 --zero-hpz-partition-size $RPN --zero-quantized-gradients 1"
for run in plain zeropp; do
    flags=""; [ $run = zeropp ] && flags=$ZPP
    t0=$(date +%s)
    ZEROC_RANKS_PER_NODE=$RPN mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$NP" build/z3/train_gpt_cpu \
        --arch llama --preset mini --batch $((32 / NP)) --seq 64 --steps "$STEPS" --lr 5e-3 --warmup 20 --shuffle 1 \
        --val-every 50 --val-batches 8 --quiet 1 $flags --log "$BENCH_OUT/$run.jsonl" > "$BENCH_OUT/$run.out" 2>&1
    say "# $run: $(( $(date +%s) - t0 )) s${flags:+ ($flags)}"
done
$BENCH_PY - "$BENCH_OUT/plain.jsonl" "$BENCH_OUT/zeropp.jsonl" <<'PYEOF' | tee -a "$BENCH_RECORD"
import json, sys
def load(p):
    r = [json.loads(l) for l in open(p)]
    return ({x["step"]: x for x in r if x.get("type") == "train"}, {x["step"]: x["val_loss"] for x in r if x.get("type") == "val"},
            next(x for x in r if x.get("type") == "comm"))
(a, va, ca), (b, vb, cb) = load(sys.argv[1]), load(sys.argv[2])
steps = sorted(set(a) & set(b))
d = [abs(a[s]["loss"] - b[s]["loss"]) for s in steps]
print(f"train loss over {len(steps)} steps: max |ZeRO++ - ZeRO-3| {max(d):.4f} (step {steps[d.index(max(d))]}), mean {sum(d) / len(d):.4f}; "
      f"last step {a[steps[-1]]['loss']:.4f} vs {b[steps[-1]]['loss']:.4f}")
tail = steps[-50:]
print(f"mean loss over the last {len(tail)} steps: ZeRO-3 {sum(a[s]['loss'] for s in tail) / len(tail):.4f}, "
      f"ZeRO++ {sum(b[s]['loss'] for s in tail) / len(tail):.4f}")
print("val loss (step: ZeRO-3, ZeRO++): " + ", ".join(f"{s}: {va[s]:.4f}, {vb[s]:.4f}" for s in sorted(set(va) & set(vb))))
for key, what in (("qwz_max_rel_error", "qwZ int8"), ("qgz_max_rel_error", "qgZ int4")):
    e = [b[s][key] for s in steps if key in b[s]]
    print(f"{what} worst block error per step (max |x - q(x)| over the block's max |x|): {min(e):.4f} to {max(e):.4f}")
print(f"cross-node bytes per rank per step: ZeRO-3 {ca['cross_node_total_bytes']:.0f}, ZeRO++ {cb['cross_node_total_bytes']:.0f} "
      f"({ca['cross_node_total_bytes'] / cb['cross_node_total_bytes']:.2f}x less); intra-node ZeRO++ {cb['intra_node_total_bytes']:.0f}")
PYEOF
$BENCH_PY scripts/plot_losses.py "$BENCH_OUT/plain.jsonl" "$BENCH_OUT/zeropp.jsonl" --labels "ZeRO-3,ZeRO++ (qwZ+hpZ+qgZ)" \
    --title "demo model, $NP ranks as $((NP / RPN)) nodes: ZeRO-3 vs ZeRO++" --out bench/zeropp_convergence.png | tail -1 | sed 's/^/# plot: /' | tee -a "$BENCH_RECORD"
say "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
cp "$BENCH_RECORD" bench/zeropp_convergence.txt
echo "written: bench/zeropp_convergence.txt, bench/zeropp_convergence.png"
