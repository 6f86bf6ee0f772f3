#!/usr/bin/env bash
# scripts/compare.sh: loss curves of the C trainer (./train_gpt_cpu_zero$ZERO, which leaves ./train_gpt_cpu as it is) and the PyTorch reference
# (scripts/train_gpt.py) from the same initial weights, on the same data with the same flags.
#
#   make compare ARCH=gpt2|llama STEPS=200            (or: ARCH=llama bash scripts/compare.sh)
#
# 1. $TRAINER --steps 0 --save DIR writes the initial weights DIR/ckpt_00000000/model.bin
# 2. both trainers train from them (--init) and log JSONL to $OUT/{c,torch}_$ARCH.jsonl
# 3. scripts/plot_losses.py draws $OUT/loss_$ARCH.png
# The last line printed is "max |loss diff| over N steps: X".
# Variables: ARCH (gpt2), STEPS (200), PYTHON (python3: the scripts then run with one that has torch,
# numpy and matplotlib, scripts/need_modules.py), THREADS (all cores), PRESET (tiny), BATCH (4), SEQ (64),
# VAL_EVERY (50), ZERO (0: the ZeRO stage of the C binary), EXTRA (more flags for both), OUT (out/compare).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-gpt2}
STEPS=${STEPS:-200}
PYTHON=${PYTHON:-python3}
THREADS=${THREADS:-$(nproc)}
PRESET=${PRESET:-tiny}
BATCH=${BATCH:-4}
SEQ=${SEQ:-64}
VAL_EVERY=${VAL_EVERY:-50}
ZERO=${ZERO:-0}
EXTRA=${EXTRA:-}
MAKE=${MAKE:-make}
OUT=${OUT:-out/compare}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "compare: $*" >&2; exit 1; }
case "$ARCH" in gpt2|llama) ;; *) die "ARCH must be gpt2 or llama, got '$ARCH'";; esac

# the stage's own binary: ./train_gpt_cpu, the user's last build, stays as it is
TRAINER=./train_gpt_cpu_zero$ZERO
$MAKE -s "$TRAINER" || die "cannot build $TRAINER"
if [ ! -f data/brown/train.bin ] || [ ! -f data/brown/val.bin ]; then
    echo "compare: data/brown/{train,val}.bin missing: running make data"
    $MAKE -s data || die "make data failed"
fi
mkdir -p "$OUT"

INIT_DIR=$OUT/init_$ARCH
rm -rf "$INIT_DIR"
echo "== initial weights: $TRAINER --steps 0 --save $INIT_DIR"
"$TRAINER" --arch "$ARCH" --preset "$PRESET" --batch "$BATCH" --seq "$SEQ" --threads "$THREADS" \
    --steps 0 --save "$INIT_DIR" --quiet 1
INIT=$INIT_DIR/ckpt_00000000/model.bin
[ -f "$INIT" ] || die "$TRAINER --steps 0 --save $INIT_DIR did not write $INIT"

# shellcheck disable=SC2206
FLAGS=(--arch "$ARCH" --preset "$PRESET" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --threads "$THREADS"
       --init "$INIT" --train data/brown/train.bin --val data/brown/val.bin --val-every "$VAL_EVERY" --val-batches 4
       $EXTRA)

echo "== C: $TRAINER ${FLAGS[*]}"
start=$(date +%s)
"$TRAINER" "${FLAGS[@]}" --log "$OUT/c_$ARCH.jsonl" | tail -n 3
echo "   $(( $(date +%s) - start )) s"

echo "== PyTorch: scripts/train_gpt.py ${FLAGS[*]}"
start=$(date +%s)
"$PYTHON" scripts/train_gpt.py "${FLAGS[@]}" --log "$OUT/torch_$ARCH.jsonl" | tail -n 3
echo "   $(( $(date +%s) - start )) s"

echo "== plot"
"$PYTHON" scripts/plot_losses.py "$OUT/c_$ARCH.jsonl" "$OUT/torch_$ARCH.jsonl" --labels C,PyTorch \
    --title "$ARCH $PRESET: train_gpt_cpu vs PyTorch (B=$BATCH, T=$SEQ)" --out "$OUT/loss_$ARCH.png"
