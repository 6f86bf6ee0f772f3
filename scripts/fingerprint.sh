#!/usr/bin/env bash
# Fingerprint of the CPU trainer's behaviour: for ZeRO stages 0-3, 1 and 4 ranks,
# gpt2 and llama, a short run (accumulation 2, clipping on, validation and a
# sample) whose every logged loss and the SHA-256 of the saved model and
# optimizer files are printed. Two builds are bitwise identical when their
# fingerprints are equal: `bash scripts/fingerprint.sh > a.txt`, change the code,
# `bash scripts/fingerprint.sh > b.txt`, `diff a.txt b.txt`.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s zero-bins > /dev/null
MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader"
TMP=$(mktemp -d /tmp/zeroc_fp.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
for arch in gpt2 llama; do
  for stage in 0 1 2 3; do
    for np in 1 4; do
      d="$TMP/$arch-$stage-$np"
      $MPIRUN -np $np build/z$stage/train_gpt_cpu --arch $arch --preset tiny --batch 2 --seq 32 --accum 2 --steps 6 \
          --threads 1 --val-every 3 --val-batches 2 --sample-every 6 --sample-len 8 \
          --log "$d.jsonl" --save "$d" > "$d.out" 2>&1
      losses=$(grep -E '"type":"(train|val)"' "$d.jsonl" | sed -E 's/.*"(loss|val_loss)":([^,}]*).*/\2/' | tr '\n' ' ')
      ck="$d/$(cat "$d/latest")"
      sums=$(cd "$ck" && sha256sum model.bin optim_rank_*.bin | cut -c1-16 | tr '\n' ' ')
      sample=$(grep '^sample:' "$d.out" | sha256sum | cut -c1-12)
      echo "$arch stage $stage x $np | losses $losses| files $sums| samples $sample"
    done
  done
done
