#!/usr/bin/env bash
# bench/cpu_train.sh: training throughput of ./train_gpt_cpu vs the PyTorch reference
# (scripts/train_gpt.py) on the same model (preset small, gpt2 and llama), the same data (Brown),
# batch, sequence length and thread count, measured back to back in this run.
# Tokens/s = tokens / time over steps WARMUP+1..STEPS of each trainer's JSONL log.
# Ends with: "cpu_train: X.XXx PyTorch (gpt2), Y.YYx PyTorch (llama)".
# Variables: STEPS (30), WARMUP (3), BATCH (4), SEQ (128), THREADS (all cores), PRESET (small),
# PYTHON (/usr/bin/python3), ZERO (0).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-3}
BATCH=${BATCH:-4}
SEQ=${SEQ:-128}
THREADS=${THREADS:-$(nproc)}
PRESET=${PRESET:-small}
PYTHON=${PYTHON:-/usr/bin/python3}
ZERO=${ZERO:-0}
MAKE=${MAKE:-make}
OUT=out/bench/cpu_train
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "cpu_train: $*" >&2; exit 1; }
[ "$STEPS" -gt "$WARMUP" ] || die "STEPS ($STEPS) must exceed WARMUP ($WARMUP)"
"$PYTHON" -c "import torch" 2>/dev/null || die "$PYTHON cannot import torch"
$MAKE -s train_gpt_cpu ZERO="$ZERO" || die "cannot build ./train_gpt_cpu"
if [ ! -f data/brown/train.bin ]; then
    echo "cpu_train: data/brown/train.bin missing: running make data"
    $MAKE -s data || die "make data failed"
fi
mkdir -p "$OUT"

# tokens/s over the steps after the warm-up: sum(tokens) / sum(time)
rate() {
    "$PYTHON" - "$1" "$WARMUP" <<'PY'
import json, sys
tok = sec = 0.0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train" and r["step"] > int(sys.argv[2]):
        tok += r["tokens_per_sec"] * r["ms"] / 1000.0
        sec += r["ms"] / 1000.0
if sec <= 0:
    sys.exit("%s: no timed steps after the warm-up" % sys.argv[1])
print("%.1f" % (tok / sec))
PY
}

echo "cpu_train: preset $PRESET, B=$BATCH, T=$SEQ, $STEPS steps (first $WARMUP excluded), $THREADS threads, $(nproc) cores"
declare -A C_RATE PT_RATE
for arch in gpt2 llama; do
    FLAGS=(--arch "$arch" --preset "$PRESET" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --threads "$THREADS"
           --train data/brown/train.bin --lr-schedule constant --quiet 1)
    ./train_gpt_cpu "${FLAGS[@]}" --log "$OUT/c_$arch.jsonl" > "$OUT/c_$arch.out" \
        || die "./train_gpt_cpu failed for $arch (see $OUT/c_$arch.out)"
    "$PYTHON" scripts/train_gpt.py "${FLAGS[@]}" --log "$OUT/torch_$arch.jsonl" > "$OUT/torch_$arch.out" \
        || die "scripts/train_gpt.py failed for $arch (see $OUT/torch_$arch.out)"
    C_RATE[$arch]=$(rate "$OUT/c_$arch.jsonl")
    PT_RATE[$arch]=$(rate "$OUT/torch_$arch.jsonl")
done

printf "%-6s %14s %16s %8s\n" arch "C tok/s" "PyTorch tok/s" ratio
summary="cpu_train:"
sep=""
for arch in gpt2 llama; do
    ratio=$(awk -v a="${C_RATE[$arch]}" -v b="${PT_RATE[$arch]}" 'BEGIN { printf "%.2f", a / b }')
    printf "%-6s %14s %16s %7sx\n" "$arch" "${C_RATE[$arch]}" "${PT_RATE[$arch]}" "$ratio"
    summary="$summary$sep ${ratio}x PyTorch ($arch)"
    sep=","
done
echo "$summary"
