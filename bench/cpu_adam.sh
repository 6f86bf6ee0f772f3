#!/usr/bin/env bash
# CPU-Adam benchmark: adamw.cuh's CPU step against torch.optim.AdamW (foreach=False, the CPU default, and
# foreach=True, with scripts/train_gpt.py's allocator tuning) and against the machine's stream bandwidth
# (a STREAM-style triad, plain and with streaming stores, measured in the same run), for 1M, 10M and
# 100M parameters at 1 and all threads. Writes bench/cpu_adam.txt (bench/lib.sh: refused when other
# processes used the CPU during a run, unless BENCH_ALLOW_NOISY=1 marks it NOISY); the last line is
#   cpu_adam: X.Xx torch AdamW (foreach=False), Y.Yx (foreach=True), G GB/s at 28 B/param = P% of the stream bandwidth (S GB/s)
# for the largest size at the full thread count. Needs ~5 GB of memory and /usr/bin/python3 with torch.
#   SIZES=1e6,1e7,1e8 THREADS=1,2 PYTHON=/usr/bin/python3 bash bench/cpu_adam.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
SIZES=${SIZES:-1e6,1e7,1e8}
NPROC=$(nproc)
THREADS=${THREADS:-$( [ "$NPROC" -gt 1 ] && echo "1,$NPROC" || echo 1 )}
make -s build/cpu_adam
bench_init cpu_adam
bench_header "bench/cpu_adam.sh: CPU-Adam (adamw.cuh) vs torch.optim.AdamW and the stream bandwidth, one run"
raw=$BENCH_OUT/results.txt
: > "$raw"
have_torch=1
"$BENCH_PY" -c 'import torch' 2>/dev/null || { have_torch=0; say "# torch not importable by $BENCH_PY: no torch columns"; }
for n in ${SIZES//,/ }; do
    bench_run "CPU-Adam and triads, n=$n" -- ./build/cpu_adam --sizes "$n" --threads "$THREADS" > "$BENCH_OUT/c_$n.out" \
        || [ $? -eq 3 ] || { echo "cpu_adam: build/cpu_adam failed" >&2; exit 1; }
    tee -a "$BENCH_RECORD" < "$BENCH_OUT/c_$n.out" >> "$raw"
    if [ $have_torch = 1 ]; then
        bench_run "torch AdamW, n=$n" -- "$BENCH_PY" bench/cpu_adam_torch.py --sizes "$n" --threads "$THREADS" > "$BENCH_OUT/torch_$n.out" \
            || [ $? -eq 3 ] || { echo "cpu_adam: bench/cpu_adam_torch.py failed" >&2; exit 1; }
        tee -a "$BENCH_RECORD" < "$BENCH_OUT/torch_$n.out" >> "$raw"
    fi
done
say ""
"$BENCH_PY" bench/cpu_adam_torch.py --report "$raw" | tee -a "$BENCH_RECORD"
bench_finish cpu_adam.txt
