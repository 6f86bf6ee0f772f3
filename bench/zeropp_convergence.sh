#!/usr/bin/env bash
# bench/zeropp_convergence.sh: what ZeRO++'s quantization costs in convergence. Two models: the demo
# model (scripts/demo.sh's CPU run: llama preset mini, 4 layers) and a deeper one (the same with 12
# layers), each at ZeRO stage 3 with --persistence-threshold 0, so that every unit is partitioned and
# gathered per use and every part acts on every unit: plain ZeRO-3, qwZ alone, qgZ alone and all three
# (qwZ, hpZ, qgZ). 4 ranks as 2 "nodes" of 2 (ZEROC_RANKS_PER_NODE=2, test-only: one machine, nothing
# timed), global batch 32 x 64 tokens, lr 5e-3, STEPS steps on the Brown data. hpZ alone moves the
# same values as ZeRO-3, so it runs HPZ_STEPS steps only, to show its losses equal ZeRO-3's bitwise.
# Prints per variant the mean and the final |loss - ZeRO-3's|, the mean loss over the last 50 steps,
# the validation losses, the range of the per-step relative RMS errors of what qwZ and qgZ quantized,
# and the cross-node bytes per step. The runs go in the order of RUNS, the most telling first; the
# summary covers what finished (SUMMARY_ONLY=1 prints it from the runs so far; with RECORD=1 it also
# records it). Writes bench/zeropp_convergence.txt and the curves, bench/zeropp_convergence.png (demo) and
# bench/zeropp_convergence_deep.png.
#   bash bench/zeropp_convergence.sh            (STEPS=300 HPZ_STEPS=20; BIN, OUT, RUNS, LR_TOTAL)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
STEPS=${STEPS:-300}
HPZ_STEPS=${HPZ_STEPS:-20}
LR_TOTAL=${LR_TOTAL:-}   # a shorter run on the schedule of a longer one: --lr-total-steps
RUNS=${RUNS:-"demo:plain demo:all deep:plain deep:all demo:hpz deep:hpz demo:qw demo:qg deep:qw deep:qg"}
[ -f data/brown/train.bin ] || bash scripts/prepare_data.sh
BIN=${BIN:-build/z3/train_gpt_cpu}   # a copy keeps a long run from meeting a rebuild
[ "$BIN" != build/z3/train_gpt_cpu ] || make -s build/z3/train_gpt_cpu
OUT=${OUT:-out/bench/zeropp_convergence}
mkdir -p "$OUT"
flags_of() {
    case $1 in
        plain) echo "";;
        qw) echo "--zero-quantized-weights 1";;
        hpz) echo "--zero-hpz-partition-size 2";;
        qg) echo "--zero-quantized-gradients 1";;
        all) echo "--zero-quantized-weights 1 --zero-hpz-partition-size 2 --zero-quantized-gradients 1";;
    esac
}
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then
    bench_init zeropp_convergence
    bench_header "ZeRO++ convergence at --persistence-threshold 0: ZeRO-3 beside qwZ, qgZ, all three (and hpZ, bitwise), $STEPS steps, 4 ranks as 2 nodes of 2"
    [ -f "$OUT/header.txt" ] || cp "$BENCH_RECORD" "$OUT/header.txt"
    for run in $RUNS; do
        model=${run%%:*} v=${run#*:}
        layers=4; [ "$model" = deep ] && layers=12
        steps=$STEPS; [ "$v" = hpz ] && steps=$HPZ_STEPS
        t0=$(date +%s)
        # shellcheck disable=SC2046  # the variant's flags
        ZEROC_RANKS_PER_NODE=2 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 4 "$BIN" \
            --arch llama --preset mini --layers $layers --batch 8 --seq 64 --steps "$steps" --lr 5e-3 --warmup 20 --shuffle 1 \
            --val-every 50 --val-batches 8 --quiet 1 --persistence-threshold 0 $(flags_of "$v") ${LR_TOTAL:+--lr-total-steps $LR_TOTAL} \
            --log "$OUT/$model.$v.jsonl" > "$OUT/$model.$v.out" 2>&1
        echo "# $model ($layers layers), $v: exit $?, $(( $(date +%s) - t0 )) s, $steps steps${LR_TOTAL:+ on the schedule of $LR_TOTAL}" >> "$OUT/times.txt"
    done
fi
{
cat "$OUT/header.txt" 2> /dev/null
cat "$OUT/times.txt" 2> /dev/null
$BENCH_PY - "$OUT" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
def load(model, v):
    p = f"{out}/{model}.{v}.jsonl"
    if not os.path.exists(p): return None
    r = [json.loads(l) for l in open(p) if l.strip()]
    tr = {x["step"]: x for x in r if x.get("type") == "train"}
    if not tr: return None
    return tr, {x["step"]: x["val_loss"] for x in r if x.get("type") == "val"}, next((x for x in r if x.get("type") == "comm"), None)
for model, desc in (("demo", "the demo model, llama mini, 4 layers"), ("deep", "the deeper model, llama mini with 12 layers")):
    base = load(model, "plain")
    if not base: print(f"{desc}: no ZeRO-3 run"); continue
    a, va, ca = base
    print(f"\n{desc}: ZeRO-3 over {len(a)} steps, final loss {a[max(a)]['loss']:.4f}")
    for v, name in (("qw", "qwZ"), ("qg", "qgZ"), ("all", "all three"), ("hpz", "hpZ")):
        got = load(model, v)
        if not got: print(f"  {name}: not run"); continue
        b, vb, cb = got
        steps = sorted(set(a) & set(b))
        d = [b[s]["loss"] - a[s]["loss"] for s in steps]
        if v == "hpz":
            print(f"  {name}: {len(steps)} steps, losses bitwise equal to ZeRO-3's: {all(x == 0 for x in d)}"); continue
        tail = steps[-50:]
        line = (f"  {name}: {len(steps)} steps; loss - ZeRO-3's: mean {sum(d) / len(d):+.4f}, mean |.| {sum(map(abs, d)) / len(d):.4f}, "
                f"final {d[-1]:+.4f} ({b[steps[-1]]['loss']:.4f} vs {a[steps[-1]]['loss']:.4f}); last {len(tail)} steps' mean "
                f"{sum(b[s]['loss'] for s in tail) / len(tail):.4f} vs {sum(a[s]['loss'] for s in tail) / len(tail):.4f}")
        vs = sorted(set(va) & set(vb))
        if vs: line += f"; final val {vb[vs[-1]]:.4f} vs {va[vs[-1]]:.4f} (step {vs[-1]})"
        print(line)
        for key, what in (("qwz_rel_rms_error", "qwZ int8"), ("qgz_rel_rms_error", "qgZ int4")):
            e = [b[s][key] for s in steps if key in b[s]]
            if e: print(f"    {what} relative RMS error per step: {min(e):.4f} to {max(e):.4f}, first {e[0]:.4f}, last {e[-1]:.4f}")
        if ca and cb:
            print(f"    cross-node bytes per rank per step: ZeRO-3 {ca['cross_node_total_bytes']:.0f}, {name} {cb['cross_node_total_bytes']:.0f}")
PYEOF
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
[ "${SUMMARY_ONLY:-0}" = 1 ] && [ -z "${RECORD:-}" ] && exit 0
cp "$OUT/summary.txt" bench/zeropp_convergence.txt
for model in demo deep; do
    png=bench/zeropp_convergence.png desc="demo model"
    [ $model = deep ] && png=bench/zeropp_convergence_deep.png desc="12 layers"
    logs=() labels=""
    for v in plain:ZeRO-3 qw:qwZ qg:qgZ "all:all three"; do
        [ -f "$OUT/$model.${v%%:*}.jsonl" ] && logs+=("$OUT/$model.${v%%:*}.jsonl") && labels+="${labels:+,}${v#*:}"
    done
    [ ${#logs[@]} -ge 2 ] && $BENCH_PY scripts/plot_losses.py "${logs[@]}" --labels "$labels" \
        --title "$desc, 4 ranks as 2 nodes, every unit partitioned: ZeRO-3 beside ZeRO++'s parts" --out $png | tail -1
done
