#!/usr/bin/env bash
# bench/memory_speed.sh: memory against speed on the CPU trainer, as a user measures them.
# For two model sizes, ZeRO stages 0-3 at RANKS ranks, with and without --recompute:
#   - peak resident memory per rank (getrusage, the max and min over ranks: the run's peak_rss record),
#   - the bytes the trainer allocated per rank (its memory record: model states, ZeRO's buffers,
#     activations, scratch), which the estimator predicts exactly,
#   - tokens/s (the median over REPEATS runs of each run's tokens / time over steps 2..STEPS),
# and the estimator's largest micro batch per rank within BUDGET_GIB for each row.
# The two sides of each comparison (recompute off / on) run alternately, REPEATS times.
# Writes bench/memory_speed.md. Variables: RANKS (4), STEPS (4), REPEATS (3), BUDGET_GIB (2).
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${RANKS:-4}
STEPS=${STEPS:-4}
REPEATS=${REPEATS:-3}
BUDGET_GIB=${BUDGET_GIB:-2}
PY=${PYTHON:-/usr/bin/python3}
OUT=out/bench/memory_speed
MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader"
mkdir -p "$OUT"
make -s zero-bins
[ -f data/brown/train.bin ] || make -s data

# name | flags (the micro batch and sequence length included)
SIZES=(
  "gpt2 small (7.2M: the 50k embedding dominates)|--arch gpt2 --preset small --batch 4 --seq 128"
  "gpt2 8 layers C=384 (33.4M: the layers are 43%)|--arch gpt2 --layers 8 --heads 6 --dim 384 --max-seq 128 --batch 4 --seq 64"
)

run() {   # run TAG STAGE RECOMPUTE FLAGS...
    local tag=$1 stage=$2 rc=$3; shift 3
    $MPIRUN -np "$RANKS" build/z$stage/train_gpt_cpu --train data/brown/train.bin --threads 1 --quiet 1 \
        --steps "$STEPS" --recompute "$rc" "$@" --log "$OUT/$tag.jsonl" > "$OUT/$tag.out" 2>&1 \
        || { echo "memory_speed: $tag failed:"; tail -3 "$OUT/$tag.out"; exit 1; }
}

{
echo "# bench/memory_speed.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $RANKS ranks x 1 thread; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# tokens/s: median of $REPEATS runs (recompute off and on alternating), steps 2..$STEPS of each"
echo
for entry in "${SIZES[@]}"; do
    name=${entry%%|*}; flags=${entry#*|}
    for stage in 0 1 2 3; do
        for rep in $(seq 1 "$REPEATS"); do
            for rc in 0 1; do run "s$(echo "$name" | cut -c1-12 | tr ' ()' '___')_z${stage}_r${rc}_$rep" "$stage" "$rc" $flags; done
        done
        build/z0/train_gpt_cpu $flags --estimate-memory "$RANKS" --memory-budget "$BUDGET_GIB" \
            --log "$OUT/est_$(echo "$name" | cut -c1-12 | tr ' ()' '___').jsonl" > /dev/null
    done
    $PY - "$OUT" "$(echo "$name" | cut -c1-12 | tr ' ()' '___')" "$name" "$flags" "$REPEATS" "$BUDGET_GIB" <<'PYEOF'
import json, statistics, sys
out, key, name, flags, repeats, budget = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
def recs(path): return [json.loads(l) for l in open(path)]
est = [r for r in recs(f"{out}/est_{key}.jsonl") if r["type"] == "estimate"][0]["max_micro_batch"]["train_gpt_cpu"]
print(f"## {name}: `{flags}`\n")
print(f"| stage | recompute | allocated / rank | peak RSS / rank (max, min) | tokens/s (median) | vs stage 0 no recompute | largest micro batch in {budget} GiB |")
print("|---|---|---|---|---|---|---|")
base = None
for stage in range(4):
    for rc in (0, 1):
        tps, rss_max, rss_min, alloc = [], [], [], None
        for rep in range(1, repeats + 1):
            R = recs(f"{out}/s{key}_z{stage}_r{rc}_{rep}.jsonl")
            train = [r for r in R if r["type"] == "train"][1:]
            tps.append(sum(r["tokens_per_sec"] * r["ms"] for r in train) / sum(r["ms"] for r in train))
            p = [r for r in R if r["type"] == "peak_rss"][0]
            rss_max.append(p["max_bytes"]); rss_min.append(p["min_bytes"])
            alloc = sum([r for r in R if r["type"] == "memory"][0]["measured_bytes"].values())
        t = statistics.median(tps)
        if base is None: base = t
        mb = est[f"stage{stage}"]["recompute_on" if rc else "recompute_off"]
        print(f"| {stage} | {'on' if rc else 'off'} | {alloc / 2**20:.1f} MiB | {statistics.median(rss_max) / 2**20:.1f}, "
              f"{statistics.median(rss_min) / 2**20:.1f} MiB | {t:.0f} | {t / base:.2f}x | {mb} |")
print()
PYEOF
done
echo "allocated: what the trainer allocated per rank (equal on every rank; --estimate-memory predicts it exactly)."
echo "peak RSS: getrusage's maximum resident set, which adds the program, the libraries (MPI, OpenBLAS) and their buffers;"
echo "at stage 0 rank 0 also holds a gradient-sized buffer OpenMPI's non-blocking all-reduce allocates."
echo "largest micro batch: the estimator (--estimate-memory $RANKS --memory-budget $BUDGET_GIB), allocated bytes only."
} | tee bench/memory_speed.md
