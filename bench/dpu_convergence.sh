#!/usr/bin/env bash
# bench/dpu_convergence.sh: what ZeRO-Offload's delayed parameter update (DPU, zero/dpu.h) costs in
# convergence, as the paper's figure of GPT-2 and BERT with and without DPU shows it. Two models, each
# trained twice at ZeRO stage 3 on the CPU trainer, without DPU and with it (--offload-dpu 1, the delay
# from update 41 on: --dpu-warmup 40): the demo model (scripts/demo.sh's CPU run: llama preset mini,
# 4 ranks, global batch 32 x 64 tokens, lr 5e-3, 300 steps on the Brown data) and the same with
# twice its layers (--layers 8). Prints the max and mean |loss difference| per step, the mean loss
# over the last 50 steps and the validation losses; plots each pair (scripts/plot_losses.py). Nothing
# here is timed: the CPU trainer runs the update on a thread beside the next step on the same cores.
# Writes bench/dpu_convergence.txt and bench/dpu_convergence_{demo,deep}.png.
#   bash bench/dpu_convergence.sh            (STEPS=300 NP=4 LR=5e-3 MODELS="demo deep"; BIN=build/z3/train_gpt_cpu)
#   TAG=_x names another record and plots: bench/dpu_convergence_x.txt, bench/dpu_convergence_x_{demo,deep}.png
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
STEPS=${STEPS:-300}
NP=${NP:-4}
BIN=${BIN:-build/z3/train_gpt_cpu}
LR=${LR:-5e-3}
MODELS=${MODELS:-demo deep}
TAG=${TAG:-}
[ -f data/brown/train.bin ] || bash scripts/prepare_data.sh
[ "$BIN" = build/z3/train_gpt_cpu ] && make -s build/z3/train_gpt_cpu
bench_init dpu_convergence$TAG
bench_header "DPU convergence: ZeRO-3 with and without the delayed parameter update (--dpu-warmup 40), $STEPS steps, $NP ranks, lr $LR" \
    "convergence only, nothing timed"
for model in $MODELS; do
    layers=""; [ $model = deep ] && layers="--layers 8"
    for dpu in 0 1; do
        t0=$(date +%s)
        mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$NP" "$BIN" \
            --arch llama --preset mini $layers --batch $((32 / NP)) --seq 64 --steps "$STEPS" --lr "$LR" --warmup 20 --shuffle 1 \
            --val-every 50 --val-batches 8 --quiet 1 --threads 1 --offload-dpu $dpu --log "$BENCH_OUT/${model}_dpu$dpu.jsonl" \
            > "$BENCH_OUT/${model}_dpu$dpu.out" 2>&1
        say "# $model${layers:+ ($layers)}, DPU $dpu: $(( $(date +%s) - t0 )) s"
    done
    $BENCH_PY - "$BENCH_OUT/${model}_dpu0.jsonl" "$BENCH_OUT/${model}_dpu1.jsonl" "$model" <<'PYEOF' | tee -a "$BENCH_RECORD"
import json, sys
def load(p):
    r = [json.loads(l) for l in open(p)]
    return {x["step"]: x["loss"] for x in r if x.get("type") == "train"}, {x["step"]: x["val_loss"] for x in r if x.get("type") == "val"}
(a, va), (b, vb) = load(sys.argv[1]), load(sys.argv[2])
steps = sorted(set(a) & set(b))
d = [abs(a[s] - b[s]) for s in steps]
late = [s for s in steps if s > 41]
print(f"{sys.argv[3]}: train loss over {len(steps)} steps: max |DPU - no DPU| {max(d):.4f} (step {steps[d.index(max(d))]}), "
      f"mean {sum(d) / len(d):.4f} (over the delayed steps 42-{steps[-1]}: {sum(abs(a[s] - b[s]) for s in late) / len(late):.4f}, "
      f"signed mean DPU - no DPU {sum(b[s] - a[s] for s in late) / len(late):+.4f}); last step {a[steps[-1]]:.4f} vs {b[steps[-1]]:.4f}")
tail = steps[-50:]
print(f"{sys.argv[3]}: mean loss over the last {len(tail)} steps: no DPU {sum(a[s] for s in tail) / len(tail):.4f}, "
      f"DPU {sum(b[s] for s in tail) / len(tail):.4f}")
print(f"{sys.argv[3]}: val loss (step: no DPU, DPU): " + ", ".join(f"{s}: {va[s]:.4f}, {vb[s]:.4f}" for s in sorted(set(va) & set(vb))))
PYEOF
    $BENCH_PY scripts/plot_losses.py "$BENCH_OUT/${model}_dpu0.jsonl" "$BENCH_OUT/${model}_dpu1.jsonl" --labels "ZeRO-3,ZeRO-3 + DPU (from update 41)" \
        --title "$model model${layers:+ ($layers)}, $NP ranks: the delayed parameter update" --out "bench/dpu_convergence${TAG}_$model.png" \
        | tail -1 | sed "s/^/# plot $model: /" | tee -a "$BENCH_RECORD"
done
say "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
cp "$BENCH_RECORD" "bench/dpu_convergence$TAG.txt"
echo "written: bench/dpu_convergence$TAG.txt and its plots, bench/dpu_convergence${TAG}_*.png"
