#!/usr/bin/env bash
# bench/cpu_train.sh: training throughput of ./train_gpt_cpu against a fair PyTorch reference
# (scripts/train_gpt.py: the real vocabulary's logits, its allocator tuning, the same threads) and against
# the machine's sgemm peak, measured side by side in one run. Writes bench/cpu_train.txt (bench/lib.sh:
# refused when other processes used the CPU during a run, unless BENCH_ALLOW_NOISY=1 marks it NOISY).
#
# Shapes (SHAPES, default "demo 124m"), both architectures each:
#   demo  preset mini (4 layers, C=64: the CPU demo's model), the demo's global batch 32 x 64 in one process
#   124m  preset gpt2-124m (GPT-2 small's shape; llama: the same sizes with GQA and SwiGLU), batch 4 x 64
# Per shape and arch, REPEATS alternating rounds (C, PyTorch, then C built with ZeRO stage 3 on its one
# rank: what stage 3 costs over stage 0 when there is nothing to partition) on the Brown data; tokens/s
# over the steps after WARMUP of each run's JSONL log, the median over the rounds. GFLOP/s: model/model.h's
# FLOPs per token (what the trainer's step line reports). The sgemm peak (build/sgemm_bench: the best
# square 2048 sgemm) and the step's GEMMs alone (the same matmuls the trainer calls, the same shapes)
# are measured in the same run, so the record shows how much of a step is sgemm and how fast it runs.
# Ends with "cpu_train: ..." lines: the ratios to PyTorch, the percentage of the sgemm peak, and the
# cost of stage 3 on one rank.
# Variables: SHAPES, REPEATS (2), THREADS (all cores), PYTHON (/usr/bin/python3), STEPS_DEMO (15),
# STEPS_124M (8), WARMUP (3), BENCH_MAX_OTHER / BENCH_RETRIES / BENCH_WAIT_QUIET / BENCH_ALLOW_NOISY (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
SHAPES=${SHAPES:-demo 124m}
REPEATS=${REPEATS:-2}
THREADS=${THREADS:-$(nproc)}
WARMUP=${WARMUP:-3}
STEPS_DEMO=${STEPS_DEMO:-15}
STEPS_124M=${STEPS_124M:-8}
MAKE=${MAKE:-make}

die() { echo "cpu_train: $*" >&2; exit 1; }
"$BENCH_PY" -c "import torch" 2>/dev/null || die "$BENCH_PY cannot import torch"
$MAKE -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu build/sgemm_bench || die "cannot build the trainers and build/sgemm_bench"
if [ ! -f data/brown/train.bin ]; then
    echo "cpu_train: data/brown/train.bin missing: running make data"
    $MAKE -s data || die "make data failed"
fi
bench_init cpu_train
bench_header "bench/cpu_train.sh: tokens/s of ./train_gpt_cpu vs scripts/train_gpt.py (PyTorch, CPU), same model, data, batch and threads, and the sgemm peak, one run"
bench_openblas_core
say "# $THREADS threads each (C: --threads; PyTorch: torch.set_num_threads), $REPEATS alternating rounds (median), first $WARMUP steps of each run excluded"

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }


declare -A C_RATE PT_RATE Z3_RATE FLOPS GEMM_S GEMM_GF PEAK
for shape in $SHAPES; do
    flags=$(bench_shape_flags "$shape") || exit 1
    read -r -a SF <<< "$flags"
    # the sgemm peak and this shape's GEMMs (gpt2 and llama), before the trainers
    for arch in gpt2 llama; do
        out=$BENCH_OUT/sgemm_${shape}_$arch.out
        bench_run "sgemm $shape $arch" -- ./build/sgemm_bench --arch "$arch" "${SF[@]}" --threads "$THREADS" > "$out" \
            || [ $? -eq 3 ] || die "build/sgemm_bench failed (see $out)"
        PEAK[$shape,$arch]=$(awk '/^RESULT sgemm_peak/ { print $5 }' "$out")
        GEMM_S[$shape,$arch]=$(awk '/^RESULT model_gemms/ { print $4 }' "$out")
        GEMM_GF[$shape,$arch]=$(awk '/^RESULT model_gemms/ { print $6 }' "$out")
        FLOPS[$shape,$arch]=$(awk '/^RESULT model_flops_per_token/ { print $3 }' "$out")
    done
    for arch in gpt2 llama; do
        FLAGS=(--arch "$arch" "${SF[@]}" --threads "$THREADS" --train data/brown/train.bin --lr-schedule constant --quiet 1)
        c_rates=(); pt_rates=(); z3_rates=()
        for rep in $(seq 1 "$REPEATS"); do
            base=$BENCH_OUT/${shape}_${arch}_$rep
            bench_run "C $shape $arch #$rep" -- ./build/z0/train_gpt_cpu "${FLAGS[@]}" --log "$base.c.jsonl" > "$base.c.out" \
                || [ $? -eq 3 ] || die "train_gpt_cpu failed (see $base.c.out)"
            bench_run "PyTorch $shape $arch #$rep" -- "$BENCH_PY" scripts/train_gpt.py "${FLAGS[@]}" --log "$base.torch.jsonl" > "$base.torch.out" \
                || [ $? -eq 3 ] || die "scripts/train_gpt.py failed (see $base.torch.out)"
            bench_run "C stage 3 $shape $arch #$rep" -- ./build/z3/train_gpt_cpu "${FLAGS[@]}" --log "$base.z3.jsonl" > "$base.z3.out" \
                || [ $? -eq 3 ] || die "build/z3/train_gpt_cpu failed (see $base.z3.out)"
            c_rates+=("$(bench_rate "$base.c.jsonl")")
            pt_rates+=("$(bench_rate "$base.torch.jsonl")")
            z3_rates+=("$(bench_rate "$base.z3.jsonl")")
        done
        C_RATE[$shape,$arch]=$(median "${c_rates[@]}")
        PT_RATE[$shape,$arch]=$(median "${pt_rates[@]}")
        Z3_RATE[$shape,$arch]=$(median "${z3_rates[@]}")
        say "# $shape $arch: C tok/s ${c_rates[*]}; PyTorch tok/s ${pt_rates[*]}; C stage 3 tok/s ${z3_rates[*]}"
    done
done

say ""
say "tok/s: median over the rounds; GFLOP/s = tok/s x model/model.h's FLOPs/token; %pk = of the square-2048 sgemm peak at $THREADS threads."
say "GEMMs alone: the step's sgemm calls replayed by build/sgemm_bench (same matmuls, same shapes); rest = C step time - GEMMs."
say "z3 cost: the C trainer built with ZeRO stage 3, on one rank, against stage 0: stage-0 tok/s / stage-3 tok/s - 1."
hdr=$(printf "%-5s %-6s | %9s %9s %6s | %7s %5s | %6s | %9s %7s %5s | %7s %7s | %7s" shape arch "C tok/s" "PT tok/s" ratio \
      "C GF/s" "%pk" "peak" "GEMM s" "GEMM GF" "%pk" "step s" "rest s" "z3 cost")
say "$hdr"
say "$(printf '%*s' ${#hdr} '' | tr ' ' '-')"
summary_pt="cpu_train:"
summary_pk="cpu_train:"
summary_z3="cpu_train: stage 3 on one rank costs"
limits=()
for shape in $SHAPES; do
    flags=$(bench_shape_flags "$shape") || exit 1
    read -r -a SF <<< "$flags"
    tokens_per_step=$(( ${SF[3]} * ${SF[5]} ))
    for arch in gpt2 llama; do
        c=${C_RATE[$shape,$arch]}; pt=${PT_RATE[$shape,$arch]}; peak=${PEAK[$shape,$arch]}
        gf=$(calc "%.1f" "$c * ${FLOPS[$shape,$arch]} * 1e-9")
        pct=$(calc "%.0f" "100 * $gf / $peak")
        step=$(calc "%.3f" "$tokens_per_step / $c")
        rest=$(calc "%.3f" "$step - ${GEMM_S[$shape,$arch]}")
        gemm_pct=$(calc "%.0f" "100 * ${GEMM_GF[$shape,$arch]} / $peak")
        ratio=$(calc "%.2f" "$c / $pt")
        z3cost=$(calc "%+.1f" "100 * ($c / ${Z3_RATE[$shape,$arch]} - 1)")
        say "$(printf "%-5s %-6s | %9.1f %9.1f %5sx | %7s %4s%% | %6.1f | %9.3f %7.1f %4s%% | %7s %7s | %6s%%" "$shape" "$arch" "$c" "$pt" "$ratio" \
               "$gf" "$pct" "$peak" "${GEMM_S[$shape,$arch]}" "${GEMM_GF[$shape,$arch]}" "$gemm_pct" "$step" "$rest" "$z3cost")"
        summary_pt="$summary_pt $shape $arch ${ratio}x PyTorch,"
        summary_pk="$summary_pk $shape $arch ${pct}% of the sgemm peak,"
        summary_z3="$summary_z3 $shape $arch ${z3cost}%,"
        if awk -v r="$ratio" 'BEGIN { exit !(r < 1.5) }'; then limits+=("$shape $arch: ${ratio}x PyTorch, below the 1.5x target"); fi
        if [ "$shape" = 124m ] && [ "$pct" -lt 50 ]; then
            ceiling=$(calc "%.0f" "100 * ${FLOPS[$shape,$arch]} * $tokens_per_step / ${GEMM_S[$shape,$arch]} * 1e-9 / $peak")
            limits+=("$shape $arch: ${pct}% of the peak, below 50%: of the $step s step the GEMMs alone take ${GEMM_S[$shape,$arch]} s, running at ${gemm_pct}% of the peak (OpenBLAS at these shapes); the other $rest s are everything else; with those at 0 s the step would reach ${ceiling}%")
        fi
    done
done
say ""
for l in "${limits[@]}"; do say "limit: $l"; done
say "${summary_pt%,}"
say "${summary_pk%,}"
say "${summary_z3%,} over stage 0"
bench_finish cpu_train.txt
