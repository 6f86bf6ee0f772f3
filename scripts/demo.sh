#!/usr/bin/env bash
# The main job: prepare the Brown data, build, train, print losses and samples.
# GPU trainer when a GPU is found (one GPU: ZeRO stage $ZERO, default 0), else the
# CPU trainer on 4 MPI ranks with ZeRO stage $ZERO (default 3), so that the run
# shows the sharding at work.
#   make demo [ZERO=k] [STEPS=N]
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
bash scripts/prepare_data.sh
mkdir -p out
if nvidia-smi -L > /dev/null 2>&1; then
    STEPS=${STEPS:-300}
    ZERO=${ZERO:-0}
    echo "demo: GPU found ($(nvidia-smi -L | head -1)); GPT-2 124M on the Brown data, ZeRO stage $ZERO"
    $MAKE -s train_gpt ZERO="$ZERO"
    ./train_gpt --preset gpt2-124m --batch 16 --seq 1024 --total-batch 32 --steps "$STEPS" --lr 6e-4 --warmup 30 \
        --val-every 50 --val-batches 8 --sample-every 100 --sample-len 64 --log out/demo_gpu.jsonl
else
    STEPS=${STEPS:-500}
    NP=${NP:-4}
    ZERO=${ZERO:-3}
    echo "demo: no GPU found; CPU trainer, preset small, $NP MPI ranks, ZeRO stage $ZERO, $STEPS steps"
    $MAKE -s train_gpt_cpu ZERO="$ZERO"
    mpirun --allow-run-as-root --oversubscribe -np "$NP" ./train_gpt_cpu --preset small --batch 2 --seq 64 \
        --steps "$STEPS" --lr 2e-3 --warmup 20 --val-every 100 --val-batches 4 --sample-every 250 --sample-len 48 \
        --log out/demo_cpu.jsonl --save out/demo_ckpt
fi
log=$(ls -t out/demo_*.jsonl | head -1)
/usr/bin/python3 scripts/plot_losses.py "$log" --out out/demo.png > /dev/null && echo "demo: loss curve in out/demo.png, log in $log"
