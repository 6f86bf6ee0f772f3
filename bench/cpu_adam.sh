#!/usr/bin/env bash
# CPU-Adam benchmark: adamw.cuh's CPU step against torch.optim.AdamW (foreach=False, the CPU
# default, and foreach=True) and against a STREAM-style triad measured in the same run, for
# 1M, 10M and 100M parameters at 1 and all threads. Writes bench/cpu_adam.txt; the last line is
#   cpu_adam: X.Xx torch AdamW, Y% of triad bandwidth
# for the largest size at the full thread count. Needs ~5 GB of memory and /usr/bin/python3 with torch.
#   SIZES=1e6,1e7,1e8 THREADS=1,2 PYTHON=/usr/bin/python3 bash bench/cpu_adam.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
SIZES=${SIZES:-1e6,1e7,1e8}
NPROC=$(nproc)
THREADS=${THREADS:-$( [ "$NPROC" -gt 1 ] && echo "1,$NPROC" || echo 1 )}
make -s build/cpu_adam
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
{
    echo "# bench/cpu_adam.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $NPROC cores, L3 $(lscpu | sed -n 's/^L3 cache: *//p'), $(grep -o -w -E 'avx2|avx512f|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (the machine may be shared; every cell is the best of several steps)"
    echo "# gcc: $(gcc --version | head -1); torch: $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)"
    ./build/cpu_adam --sizes "$SIZES" --threads "$THREADS" | tee -a "$raw"
    if $PY -c 'import torch' 2>/dev/null; then
        $PY bench/cpu_adam_torch.py --sizes "$SIZES" --threads "$THREADS" | tee -a "$raw"
    else
        echo "# torch not importable by $PY: no torch columns"
    fi
    echo
    $PY bench/cpu_adam_torch.py --report "$raw"
} | tee bench/cpu_adam.txt
