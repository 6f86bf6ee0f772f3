#!/usr/bin/env bash
# bench/record_all.sh: re-records every CPU benchmark file in bench/ in one go, on this machine:
#   bench/cpu_train.txt       train_gpt_cpu vs a fair PyTorch at the demo size and GPT-2 124M's shape, both
#                             architectures, with the sgemm peak measured in the same run (bench/cpu_train.sh)
#   bench/cpu_adam.txt        CPU-Adam vs torch.optim.AdamW (foreach off and on, the same allocator tuning)
#                             and vs the stream bandwidth, bytes per parameter stated (bench/cpu_adam.sh)
#   bench/cpu_contention.txt  all threads with one core busy vs 1 thread, before and after (bench/cpu_contention.sh)
#   bench/demo_time.txt       the CPU demo's step alone and beside one and two busy cores, which make demo's
#                             expected time comes from (bench/demo_time.sh)
# Each is written only if none of its runs saw other processes using the CPU (bench/lib.sh; BENCH_ALLOW_NOISY=1
# writes them marked NOISY instead). Run it on an otherwise idle machine; it takes about 20 minutes on 2 cores.
# Ends with one line per file: recorded, or not recorded (and where the noisy result is).
#
# BENCH_SMOKE=1 bash bench/record_all.sh: a smoke run (a few minutes on 2 cores) that checks every script
# runs end to end at reduced sizes (the demo shape only, 1 round, 6 steps; CPU-Adam at 1M parameters; the
# contention run for gpt2 only; no retries of noisy runs, at most 2 s waiting for a quiet second) and
# writes its results to out/bench/*/ only, never to bench/.
cd "$(dirname "$0")/.."
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
    export SHAPES=demo REPEATS=1 STEPS_DEMO=6 WARMUP=2 SIZES=1e6 ARCHS=gpt2 BENCH_RETRIES=0 BENCH_WAIT_QUIET=2 STEPS=5
fi
make -s bench-bins || { echo "record_all: cannot build the benchmarks" >&2; exit 1; }
status=0
results=()
for b in cpu_train cpu_adam cpu_contention demo_time; do
    echo "=== bench/$b.sh"
    if bash "bench/$b.sh"; then
        if [ "${BENCH_SMOKE:-0}" = 1 ]; then results+=("bench/$b.sh: ran end to end (smoke): out/bench/$b/$b.txt")
        elif head -1 "bench/$b.txt" | grep -q '^# NOISY'; then results+=("bench/$b.txt: recorded, marked NOISY (BENCH_ALLOW_NOISY=1)")
        else results+=("bench/$b.txt: recorded, every run quiet"); fi
    else results+=("bench/$b.txt: NOT recorded (noisy or failed; see out/bench/$b/)"); status=1
    fi
done
echo
printf '%s\n' "${results[@]}"
exit $status
