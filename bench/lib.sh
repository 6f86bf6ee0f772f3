# bench/lib.sh: what the CPU benchmark scripts share (sourced by bench/cpu_*.sh).
#
#   bench_init NAME           out/bench/NAME/ for the logs, the record being written, the load average now
#   bench_header TITLE [NOTE] the record's header: date, commit, CPU, cores, compiler, torch, load average
#                             and what makes a run NOISY, or NOTE instead (a benchmark without bench_run)
#   bench_openblas_core       which OpenBLAS kernels every run uses (see below)
#   bench_run LABEL [measure.py options] -- CMD...
#                             runs CMD under bench/measure.py: its verdict (quiet, or NOISY when other
#                             processes used more than BENCH_MAX_OTHER cores on average, default 0.10)
#                             goes to the record; a noisy run is retried (BENCH_RETRIES, default 2) after
#                             waiting for a quiet second (BENCH_WAIT_QUIET s, default 60). Returns CMD's
#                             status, or 3 when it stayed noisy.
#   bench_finish FILE         the footer (load average after, every run's verdict), then the record goes to
#                             bench/FILE only if every run was quiet. Otherwise it is refused: it stays in
#                             out/bench/NAME/FILE, the script exits 1; with BENCH_ALLOW_NOISY=1 it is
#                             written, marked NOISY in its first line and in every noisy run's verdict.
#                             With BENCH_SMOKE=1 (bench/record_all.sh's smoke mode) it only goes to
#                             out/bench/NAME/FILE, marked SMOKE, whatever the verdicts.
#
# OpenBLAS's kernels: the core OPENBLAS_CORETYPE names, else the one OpenBLAS detects. Every run of a
# benchmark (train_gpt_cpu, PyTorch, which loads the same OpenBLAS, and the sgemm peak) uses the same
# kernels; bench_openblas_core says which, and what the detected core's kernels would give (this
# machine's environment sets OPENBLAS_CORETYPE=Haswell, AVX2, where OpenBLAS would detect Cooperlake,
# AVX-512, with about twice the sgemm speed).
BENCH_PY=${PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

bench_init() {
    BENCH_NAME=$1
    BENCH_OUT=out/bench/$1
    mkdir -p "$BENCH_OUT"
    BENCH_REPORT=$BENCH_OUT/measure.txt
    BENCH_RECORD=$BENCH_OUT/record.txt
    : > "$BENCH_REPORT"
    : > "$BENCH_RECORD"
    BENCH_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
}

# prints to stdout and into the record
say() { echo "$@" | tee -a "$BENCH_RECORD"; }

bench_header() {
    local flags
    flags=$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
    say "# $1"
    say "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    say "# CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores, L3 $(lscpu | sed -n 's/^L3 cache: *//p'), ${flags}"
    say "# gcc: $(gcc --version | head -1); torch: $($BENCH_PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)"
    say "# load average at start: $BENCH_LOAD0; ${2:-a run is NOISY when other processes used more than ${BENCH_MAX_OTHER:-0.10} cores on average during it (bench/measure.py)}"
}

bench_openblas_core() {
    make -s build/sgemm_bench || { echo "bench: cannot build build/sgemm_bench" >&2; exit 1; }
    local core gf auto auto_gf
    core=$(./build/sgemm_bench --square 1024 --reps 3 --threads 1 | sed -n 's/^sgemm: OpenBLAS core \([^,]*\),.*/\1/p')
    gf=$(./build/sgemm_bench --square 1024 --reps 3 --threads 1 | awk '/^RESULT sgemm_peak/ { print $5 }')
    if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
        say "# OpenBLAS core: $core, as OpenBLAS detects it (1-thread sgemm $gf GFLOP/s); every run uses it"
        return
    fi
    auto=$(env -u OPENBLAS_CORETYPE ./build/sgemm_bench --square 1024 --reps 3 --threads 1 | sed -n 's/^sgemm: OpenBLAS core \([^,]*\),.*/\1/p')
    auto_gf=$(env -u OPENBLAS_CORETYPE ./build/sgemm_bench --square 1024 --reps 3 --threads 1 | awk '/^RESULT sgemm_peak/ { print $5 }')
    say "# OpenBLAS core: $core, chosen by OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE in the environment, for every run (1-thread sgemm $gf GFLOP/s);"
    say "#   without it OpenBLAS would detect $auto here (1-thread sgemm $auto_gf GFLOP/s): the peak and every rate below are for $core's kernels"
}

bench_run() {
    local label=$1; shift
    local rc=0
    "$BENCH_PY" bench/measure.py --label "$label" --report "$BENCH_REPORT" "$@" || rc=$?
    return $rc
}

bench_finish() {
    local file=$1 noisy
    noisy=$(grep -c "NOISY" "$BENCH_REPORT" || true)
    say ""
    say "# load average at start $BENCH_LOAD0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    say "# every run (bench/measure.py: wall time, CPU of this run, CPU of other processes, verdict):"
    sed 's/^/#   /' "$BENCH_REPORT" | tee -a "$BENCH_RECORD"
    local final=$BENCH_OUT/$file
    if [ "${BENCH_SMOKE:-0}" = 1 ]; then   # bench/record_all.sh's smoke mode: never a record
        { echo "# SMOKE RUN (BENCH_SMOKE=1: reduced sizes, $noisy noisy run(s)): not a record"; cat "$BENCH_RECORD"; } > "$final"
        echo "bench: smoke run: $final (bench/$file untouched)"
        return 0
    fi
    if [ "$noisy" -eq 0 ]; then
        cp "$BENCH_RECORD" "bench/$file"
        echo "bench: wrote bench/$file (every run quiet)"
        return 0
    fi
    { echo "# NOISY: $noisy measured run(s) had other processes using the CPU (see the verdicts at the end): not a clean record"
      cat "$BENCH_RECORD"; } > "$final"
    if [ "${BENCH_ALLOW_NOISY:-0}" = 1 ]; then
        cp "$final" "bench/$file"
        echo "bench: wrote bench/$file MARKED NOISY ($noisy noisy run(s); BENCH_ALLOW_NOISY=1)"
        return 0
    fi
    echo "bench: NOT recording bench/$file: $noisy run(s) were noisy (other processes used the CPU); the result is in $final." >&2
    echo "bench: run it again on a quiet machine, or set BENCH_ALLOW_NOISY=1 to record it marked NOISY." >&2
    return 1
}

# tokens/s of a trainer's JSONL log over the steps after the warm-up ($WARMUP): sum(tokens) / sum(time)
bench_rate() {
    "$BENCH_PY" - "$1" "$WARMUP" <<'PY'
import json, sys
tok = sec = 0.0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train" and r["step"] > int(sys.argv[2]):
        tok += r["tokens_per_sec"] * r["ms"] / 1000.0
        sec += r["ms"] / 1000.0
if sec <= 0:
    sys.exit("%s: no timed steps after the warm-up" % sys.argv[1])
print("%.2f" % (tok / sec))
PY
}

# the trainer's flags for a benchmark shape: preset, batch, seq, steps ($STEPS_DEMO, $STEPS_124M)
bench_shape_flags() {
    case $1 in
        demo) echo "--preset mini --batch 32 --seq 64 --steps $STEPS_DEMO" ;;
        124m) echo "--preset gpt2-124m --batch 4 --seq 64 --steps $STEPS_124M" ;;
        *) echo "bench: unknown shape '$1' (demo, 124m)" >&2; return 1 ;;
    esac
}
