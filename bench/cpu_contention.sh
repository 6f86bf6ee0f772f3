#!/usr/bin/env bash
# bench/cpu_contention.sh: the CPU trainer when another process keeps one core busy. With one of the
# machine's cores taken, a step on all cores' threads should cost about that core's share, so the target
# is: all threads with one core busy >= 1 thread on a machine to itself. Measured for the trainer built
# from BASE (default f03c1d0: the commit before issue 18's changes, the "before") and from this working
# tree (the "after"), side by side in one run. Writes bench/cpu_contention.txt (bench/lib.sh: refused
# when other processes than the busy loop used the CPU during a run, unless BENCH_ALLOW_NOISY=1).
#
# Per shape (SHAPES, default "demo 124m": bench/cpu_train.sh's shapes), arch (ARCHS, default "llama gpt2")
# and build: 1 thread alone, all threads alone, all threads with a busy loop pinned to the last core
# (bench/measure.py --busy-core). tokens/s over the steps after WARMUP of each run's JSONL log.
# Variables: BASE, SHAPES, ARCHS, THREADS (all cores), STEPS_DEMO (15), STEPS_124M (6), WARMUP (2), and
# BENCH_MAX_OTHER / BENCH_RETRIES / BENCH_WAIT_QUIET / BENCH_ALLOW_NOISY (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
BASE=${BASE:-f03c1d0}
SHAPES=${SHAPES:-demo 124m}
ARCHS=${ARCHS:-llama gpt2}
THREADS=${THREADS:-$(nproc)}
STEPS_DEMO=${STEPS_DEMO:-15}
STEPS_124M=${STEPS_124M:-6}
WARMUP=${WARMUP:-2}
MAKE=${MAKE:-make}
die() { echo "cpu_contention: $*" >&2; exit 1; }
[ "$THREADS" -gt 1 ] || die "needs at least 2 threads (THREADS=$THREADS)"
[ -f data/brown/train.bin ] || $MAKE -s data || die "make data failed"
$MAKE -s build/z0/train_gpt_cpu || die "cannot build build/z0/train_gpt_cpu"

# the "before" trainer: BASE's sources, built in out/bench/
base_sha=$(git rev-parse --short "$BASE") || die "BASE=$BASE is not a commit"
base_dir=out/bench/base-$base_sha
if [ ! -x "$base_dir/build/z0/train_gpt_cpu" ]; then
    rm -rf "$base_dir" && mkdir -p "$base_dir"
    git archive "$base_sha" | tar -x -C "$base_dir"
    $MAKE -s -C "$base_dir" build/z0/train_gpt_cpu > /dev/null || die "cannot build $BASE's trainer in $base_dir"
fi

bench_init cpu_contention
bench_header "bench/cpu_contention.sh: tokens/s of ./train_gpt_cpu with one core kept busy by another process, before ($base_sha) and after (this tree), one run"
bench_openblas_core
busy_core=$(( $(nproc) - 1 ))
say "# $THREADS threads = all cores; the busy loop is pinned to core $busy_core; first $WARMUP steps of each run excluded"


declare -A R
for shape in $SHAPES; do
    flags=$(bench_shape_flags "$shape") || exit 1
    read -r -a SF <<< "$flags"
    for arch in $ARCHS; do
        for build in before after; do
            bin=./build/z0/train_gpt_cpu
            [ $build = before ] && bin=$base_dir/build/z0/train_gpt_cpu
            for cfg in one all busy; do
                t=$THREADS; extra=()
                [ $cfg = one ] && t=1
                [ $cfg = busy ] && extra=(--busy-core "$busy_core")
                log=$BENCH_OUT/${shape}_${arch}_${build}_$cfg
                bench_run "$shape $arch $build: $t thread(s)$([ $cfg = busy ] && echo ', one core busy')" "${extra[@]}" -- \
                    "$bin" --arch "$arch" "${SF[@]}" --threads "$t" --train data/brown/train.bin --lr-schedule constant --quiet 1 \
                    --log "$log.jsonl" > "$log.out" || [ $? -eq 3 ] || die "the trainer failed (see $log.out)"
                R[$shape,$arch,$build,$cfg]=$(bench_rate "$log.jsonl")
            done
        done
    done
done

say ""
say "tok/s per configuration; busy/1: all threads with one core busy, relative to 1 thread alone (target >= 1.00)"
hdr=$(printf "%-5s %-6s %-7s | %10s %12s %16s | %7s" shape arch build "1 thread" "$THREADS threads" "$THREADS + busy core" "busy/1")
say "$hdr"
say "$(printf '%*s' ${#hdr} '' | tr ' ' '-')"
summary="cpu_contention (all threads with one core busy / 1 thread alone):"
for shape in $SHAPES; do
    for arch in $ARCHS; do
        for build in before after; do
            one=${R[$shape,$arch,$build,one]}; all=${R[$shape,$arch,$build,all]}; busy=${R[$shape,$arch,$build,busy]}
            ratio=$(awk -v a="$busy" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
            say "$(printf "%-5s %-6s %-7s | %10s %12s %16s | %6sx" "$shape" "$arch" "$build" "$one" "$all" "$busy" "$ratio")"
            summary="$summary $shape $arch $build ${ratio}x,"
        done
    done
done
say ""
say "${summary%,}"
bench_finish cpu_contention.txt
