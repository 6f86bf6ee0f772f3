#!/usr/bin/env bash
# bench/demo_time.sh: how long the CPU demo's training takes, on idle cores and beside other work, for
# the time scripts/demo.sh announces before it starts. Runs the demo's own command (scripts/demo.sh:
# 4 ranks, ZeRO-3, llama mini, its batch and flags) for STEPS steps (default 20) three times: alone,
# with one busy loop pinned to a core, with one on each of two cores (bench/measure.py --busy-core).
# Per run: the wall time per step after the first WARMUP (default 3) steps, from the JSONL log, the
# CPU time per step of the ranks (their work, whatever else runs), the load average and the CPU other
# processes took (bench/measure.py). Writes bench/demo_time.txt; its RESULT lines are what demo.sh reads:
#   RESULT demo_step busy=B wall_s=W cpu_s=C others=O     (B busy cores; O: other processes' cores)
# On a machine that was not idle the busy=0 wall time is not the idle time: demo.sh then takes the CPU
# time per step spread over the cores (a lower bound) and says so; the record is marked NOISY
# (bench/lib.sh: BENCH_ALLOW_NOISY=1 records it anyway).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
NP=${NP:-4}
MAKE=${MAKE:-make}
die() { echo "demo_time: $*" >&2; exit 1; }
[ -f data/brown/train.bin ] || $MAKE -s data || die "make data failed"
$MAKE -s build/z3/train_gpt_cpu || die "cannot build build/z3/train_gpt_cpu"
cores=$(nproc)

bench_init demo_time
bench_header "bench/demo_time.sh: the CPU demo's training (scripts/demo.sh's command, $NP ranks, ZeRO-3, llama mini) per step, alone and beside busy cores"
say "# $cores cores; $STEPS steps per run, the first $WARMUP excluded from the wall time per step"
for busy in 0 1 2; do
    [ $busy -le "$cores" ] || break
    cores_list=$(seq -s, $((cores - busy)) $((cores - 1)))
    extra=(); [ $busy -gt 0 ] && extra=(--busy-core "$cores_list")
    log=$BENCH_OUT/busy$busy
    rm -f "$log.jsonl"
    bench_run "demo, $busy core(s) busy" "${extra[@]}" -- \
        mpirun --oversubscribe -np "$NP" ./build/z3/train_gpt_cpu --arch llama --preset mini --batch $((32 / NP)) --seq 64 \
        --steps "$STEPS" --lr 5e-3 --warmup 20 --shuffle 1 --quiet 1 --log "$log.jsonl" > "$log.out" 2>&1 || [ $? -eq 3 ] ||
        die "the trainer failed (see $log.out)"
    read -r wall_s <<< "$("$BENCH_PY" -c "
import json, sys
ms = [r['ms'] for r in map(json.loads, open(sys.argv[1])) if r.get('type') == 'train' and r['step'] > int(sys.argv[2])]
print('%.4f' % (sum(ms) / len(ms) / 1000))" "$log.jsonl" "$WARMUP")"
    m=$(tail -1 "$BENCH_REPORT")
    wall=$(echo "$m" | sed -n 's/.*wall \([0-9.]*\) s.*/\1/p')
    own=$(echo "$m" | sed -n 's/.*this run \([0-9.]*\) cores.*/\1/p')
    others=$(echo "$m" | sed -n 's/.*others \([0-9.]*\) cores.*/\1/p')
    cpu_s=$(awk -v w="$wall" -v o="$own" -v n="$STEPS" 'BEGIN { printf "%.4f", w * o / n }')
    say "RESULT demo_step busy=$busy wall_s=$wall_s cpu_s=$cpu_s others=$others"
done
say ""
say "# wall_s: seconds per step after the warm-up (the log's ms); cpu_s: the ranks' CPU seconds per step (the whole run's"
say "# CPU over its steps, start-up included); others: cores other processes used during the run (besides the busy loops)"
bench_finish demo_time.txt
