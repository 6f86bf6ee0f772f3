#!/usr/bin/env bash
# The main job: prepare the Brown data, build, train, print losses and samples.
# GPU trainer when a GPU is found (one GPU: ZeRO stage $ZERO, default 0), else the
# CPU trainer on 4 MPI ranks with ZeRO stage $ZERO (default 3), so that the run
# shows the sharding at work (the plan, memory and communication tables), ending
# with a summary of the loss curve against what word frequencies alone give.
# Each demo starts from scratch: the previous demo's checkpoints are moved aside to
# $OUT/demo_ckpt.prev (replacing older ones there), so that no old checkpoint sits beside the
# new ones, and the logs are written anew.
#   make demo [ZERO=k] [STEPS=N]        (OUT=DIR: the output folder, default out; NP=N: CPU ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
OUT=${OUT:-out}
# the settings in one line each, before anything runs (a traceback or a compile error said it before)
for v in STEPS NP ZERO; do
    [ -z "${!v:-}" ] && continue
    case "$v" in ZERO) ok='^[0-3]$'; what="a ZeRO stage, 0 to 3";; NP) ok='^[1-9][0-9]*$'; what="a whole number >= 1";;
                 *) ok='^(0|[1-9][0-9]*)$'; what="a whole number >= 0 (0: the initial weights only)";; esac
    [[ "${!v}" =~ $ok ]] || { echo "error: make demo $v=${!v}: expected $what" >&2; exit 2; }
done
if ! nvidia-smi -L > /dev/null 2>&1; then   # the time to expect, and the load now, before anything starts
    python3 scripts/demo_expect.py bench/demo_time.txt "${STEPS:-300}" "${NP:-4}"
fi
bash scripts/prepare_data.sh
mkdir -p "$OUT"
if [ -d "$OUT/demo_ckpt" ]; then
    rm -rf "$OUT/demo_ckpt.prev"
    mv "$OUT/demo_ckpt" "$OUT/demo_ckpt.prev"
    echo "demo: starting from scratch; the previous demo's checkpoints are now in $OUT/demo_ckpt.prev" \
         "(latest $(cat "$OUT/demo_ckpt.prev/latest" 2>/dev/null || echo none))"
fi
if nvidia-smi -L > /dev/null 2>&1; then
    STEPS=${STEPS:-300}
    ZERO=${ZERO:-0}
    echo "demo: GPU found ($(nvidia-smi -L | head -1)); GPT-2 124M on the Brown data, ZeRO stage $ZERO"
    $MAKE -s train_gpt ZERO="$ZERO"
    ./train_gpt --preset gpt2-124m --batch 16 --seq 1024 --total-batch 32 --steps "$STEPS" --lr 6e-4 --warmup 30 \
        --val-every 50 --val-batches 8 --sample-every 100 --sample-len 64 --log "$OUT/demo_gpu.jsonl"
else
    # Preset mini (llama, 4 layers, C=64; 6.6M parameters, most of them the 50k-row embedding and head):
    # its cost per token is mostly the 50304-way softmax, so a wider model learns little more per
    # second. A global batch of 32 sequences x 64 tokens with lr 5e-3 learns most per token here;
    # --shuffle 1 mixes Brown's genres (in file order the train loss drifts with the genre).
    # 300 steps = 614k tokens, half an epoch.
    STEPS=${STEPS:-300}
    NP=${NP:-4}
    ZERO=${ZERO:-3}
    echo "demo: no GPU found; CPU trainer, llama preset mini, $NP MPI rank$([ "$NP" = 1 ] || echo s), ZeRO stage $ZERO, $STEPS steps"
    $MAKE -s "train_gpt_cpu_zero$ZERO"   # the stage's own binary: ./train_gpt_cpu, the user's last build, stays
    t0=$(date +%s)
    mpirun --allow-run-as-root --oversubscribe -np "$NP" "./train_gpt_cpu_zero$ZERO" --arch llama --preset mini --batch $((32 / NP)) --seq 64 \
        --steps "$STEPS" --lr 5e-3 --warmup 20 --shuffle 1 --val-every 50 --val-batches 8 --sample-every $((STEPS / 2)) --sample-len 40 \
        --log "$OUT/demo_cpu.jsonl" --save "$OUT/demo_ckpt"
    echo "demo: trained in $(( $(date +%s) - t0 )) s"
    [ "$STEPS" -eq 0 ] && { echo "demo: STEPS=0: nothing trained; the initial weights are in $OUT/demo_ckpt"; exit 0; }
    summary=$(python3 scripts/demo_summary.py "$OUT/demo_cpu.jsonl" data/brown/train.bin data/brown/val.bin)
    echo "$summary"
    unigram=$(echo "$summary" | sed -n 's/.*(unigram of the train data) give \([0-9.]*\) on val.*/\1/p')
    TITLE="zeroc CPU demo: llama mini, $NP rank$([ "$NP" = 1 ] || echo s), ZeRO-$ZERO, $STEPS steps on Brown"
fi
log=$(ls -t "$OUT"/demo_*.jsonl | head -1)
plot=(--title "${TITLE:-zeroc GPU demo: GPT-2 124M, ZeRO-$ZERO, $STEPS steps on Brown}")
[ -n "${unigram:-}" ] && plot+=(--baseline "$unigram:word frequencies alone (unigram), val")
python3 scripts/plot_losses.py "$log" --out "$OUT/demo.png" "${plot[@]}" > /dev/null && echo "demo: loss curve in $OUT/demo.png, log in $log"
