#!/usr/bin/env bash
# ZeRO-Infinity's NVMe offload: the optimizer step's I/O against the disk's sequential
# bandwidth, measured in the same run, and the effect of each aio knob and of the pipeline.
# Writes bench/nvme_offload.txt; the last line is
#   nvme_offload: the step's I/O at X% of the disk's sequential bandwidth (default settings)[ NOISY]
#
# The disk: build/nvme_io (bench/nvme_io.c) writes and reads a 512 MiB file sequentially through
# the same engine (O_DIRECT, 1 MiB blocks, queue depth 8). The step: train_gpt_cpu (ZeRO stage 1,
# 1 rank) on a 24M-parameter llama whose m and v (193 MB) live in the NVMe file; each step reads
# and writes them once, tile by tile. Its I/O time is the time with I/O in flight during the
# step ({"type":"nvme"}.step_io_s; median of steps 2-N); the disk would move the same bytes in
# read_bytes / R + write_bytes / W; their ratio is the efficiency (above 100% where the device
# reads and writes at once faster than one after the other).
# A shared machine's disk and CPUs drift: the run is ROUNDS rounds, each measuring the disk and
# then running every variant once; a variant's efficiency is the median over the rounds of its
# efficiency against its own round's disk. The load average is printed before and after, and a
# run where it was above 0.5 before or 3 after is marked NOISY (its numbers are what they are).
#   NVME_DIR=/mnt/nvme STEPS=5 ROUNDS=3 bash bench/nvme_offload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-5}
ROUNDS=${ROUNDS:-3}
make -s build/nvme_io build/z1/train_gpt_cpu
WORK=$(mktemp -d /tmp/zeroc_nvme_bench.XXXXXX)
DIR=${NVME_DIR:-$WORK/nvme}
mkdir -p "$DIR"
trap 'rm -rf "$WORK"' EXIT
$PY - "$WORK/tok.bin" <<'PYEOF'
import sys, numpy as np
n, vocab = 400000, 512
tok = (((np.arange(n) % 89) * 7 + np.random.default_rng(0).integers(0, 3, n)) % vocab).astype(np.uint16)
h = np.zeros(256, dtype=np.int32); h[:3] = [20240520, 1, n]
open(sys.argv[1], "wb").write(h.tobytes() + tok.tobytes())
PYEOF
MODEL="--arch llama --layers 8 --dim 512 --heads 8 --kv-heads 4 --vocab 512 --max-seq 64 --batch 1 --seq 16"
variant() {   # variant NAME WHAT [ENV=..] -- FLAGS...: one run, its JSONL as $WORK/NAME.ROUND.jsonl
    local name=$1 what=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    [ "$round" = 1 ] && echo "$name|$what" >> "$WORK/variants"
    env "${envs[@]+"${envs[@]}"}" ./build/z1/train_gpt_cpu --train "$WORK/tok.bin" $MODEL --steps "$STEPS" --threads 1 --quiet 1 \
        --offload-nvme "$DIR" --log "$WORK/$name.$round.jsonl" "$@" > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; exit 1; }
}
cfg() { echo "$2" > "$WORK/$1.json"; echo "$WORK/$1.json"; }
: > "$WORK/variants"
{
    echo "# bench/nvme_offload.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; kernel $(uname -r); liburing $(dpkg-query -W -f='${Version}' liburing-dev 2>/dev/null || echo '?')"
    echo "# NVMe directory: $DIR on $(df -P "$DIR" | awk 'NR == 2 {print $1}') ($(findmnt -n -o FSTYPE -T "$DIR" 2>/dev/null || stat -f -c %T "$DIR")); model: 24M-parameter llama, m + v 193 MB on NVMe, ZeRO 1, 1 rank, 1 thread"
    LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "# load average before: $LOAD0"
    for round in $(seq "$ROUNDS"); do
        ./build/nvme_io "$DIR" 512 > "$WORK/disk.$round"
        echo "# round $round, disk: $(cat "$WORK/disk.$round")"
        variant default "defaults (block 1 MiB, depth 8, 1 thread, 4 buffers, pipelined)" --
        variant block128k "aio.block_size 128 KiB" -- --config "$(cfg b128 '{"aio": {"block_size": 131072}}')"
        variant block4m "aio.block_size 4 MiB" -- --config "$(cfg b4m '{"aio": {"block_size": 4194304}}')"
        variant qd1 "aio.queue_depth 1" -- --config "$(cfg qd1 '{"aio": {"queue_depth": 1}}')"
        variant qd32 "aio.queue_depth 32" -- --config "$(cfg qd32 '{"aio": {"queue_depth": 32}}')"
        variant threads2 "aio.thread_count 2" -- --config "$(cfg th2 '{"aio": {"thread_count": 2}}')"
        variant single "aio.single_submit true" -- --config "$(cfg ss '{"aio": {"single_submit": true}}')"
        variant waves "aio.overlap_events false" -- --config "$(cfg ov '{"aio": {"overlap_events": false}}')"
        variant nopipe "pipeline_read/write false, buffer_count 1" -- --config \
            "$(cfg np '{"zero_optimization": {"offload_optimizer": {"pipeline_read": false, "pipeline_write": false, "buffer_count": 1}}}')"
        variant buf3 "buffer_count 3 (read 1 tile ahead)" -- --config "$(cfg b3 '{"zero_optimization": {"offload_optimizer": {"buffer_count": 3}}}')"
        variant tile256k "--nvme-tile 262144" -- --nvme-tile 262144
        variant blocking "engine: blocking pread/pwrite threads (ZEROC_AIO=threads)" ZEROC_AIO=threads --
        variant buffered "buffered I/O, no O_DIRECT (ZEROC_AIO=buffered: the page cache)" ZEROC_AIO=buffered --
        sync   # (its dirty pages written out before the next round measures the disk)
    done
    LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "# load average after: $LOAD1"
    echo
    $PY - "$WORK" "$ROUNDS" "$LOAD0" "$LOAD1" <<'PYEOF'
import json, re, statistics, sys
work, rounds, l0, l1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
med = statistics.median
bw = lambda s, k: float(re.search(k + r" (\d+) MB/s", s).group(1)) * 1e6
disk = [open("%s/disk.%d" % (work, r)).read() for r in range(1, rounds + 1)]
W, R = [bw(d, "write") for d in disk], [bw(d, "read") for d in disk]
print("disk, sequential, per round: write %s MB/s, read %s MB/s" % (" ".join("%.0f" % (w / 1e6) for w in W), " ".join("%.0f" % (r / 1e6) for r in R)))
print("per optimizer step: bytes read + written; I/O time (the time with I/O in flight: median over the rounds of each round's")
print("median over steps 2-N, and the range of those); the disk's time for those bytes (read / R + written / W of the round);")
print("efficiency (median over the rounds of disk / io); CPU-Adam's wait for I/O; the streamed step's wall time\n")
print("| %-66s | %6s | %7s | %11s | %7s | %5s | %7s | %7s |" % ("variant", "MB", "io ms", "io range", "disk ms", "eff", "wait ms", "step ms"))
print("|" + "-" * 68 + "|" + "|".join("-" * (w + 2) for w in (6, 7, 11, 7, 5, 7, 7)) + "|")
default_eff = None
for line in open(work + "/variants"):
    name, what = line.rstrip("\n").split("|", 1)
    per = []   # per round: read bytes, written bytes, io, wait, step, disk time
    for r in range(rounds):
        recs = [json.loads(l) for l in open("%s/%s.%d.jsonl" % (work, name, r + 1)) if '"type":"nvme"' in l][1:]
        m = lambda k: med(x[k] for x in recs)
        rb, wb = m("step_read_bytes"), m("step_write_bytes")
        per.append((rb, wb, m("step_io_s"), m("step_wait_s"), m("step_s"), rb / R[r] + wb / W[r]))
    io = [p[2] for p in per]
    eff = med(p[5] / p[2] for p in per)
    if name == "default": default_eff = eff
    print("| %-66s | %6.1f | %7.1f | %5.0f-%-5.0f | %7.1f | %4.0f%% | %7.1f | %7.1f |" % (what, (per[0][0] + per[0][1]) / 1e6,
          med(io) * 1e3, min(io) * 1e3, max(io) * 1e3, med(p[5] for p in per) * 1e3, eff * 100, med(p[3] for p in per) * 1e3,
          med(p[4] for p in per) * 1e3))
noisy = float(l0.split()[0]) > 0.5 or float(l1.split()[0]) > 3
print("\nnvme_offload: the step's I/O at %.0f%% of the disk's sequential bandwidth (default settings)%s" % (default_eff * 100, " NOISY" if noisy else ""))
PYEOF
} | tee bench/nvme_offload.txt
