#!/usr/bin/env bash
# bench/cluster_zeropp.sh: ZeRO-3 and ZeRO++ (qwZ, hpZ, qgZ) across nodes joined by a slow link, on
# one machine: scripts/cluster.sh's network namespaces, NODES x SLOTS ranks of the CPU trainer, tc's
# token bucket limiting each node's link to every rate of RATES. Needs root. See docs/cluster.md.
#
# Per rate: first the link itself (a TCP transfer from node 1 to node 0 must take the time the rate
# implies), then every variant (a set of trainer flags) in turn, REPEATS times, alternating, so that
# a change of the machine's load meets every variant alike. Per variant it prints the median step
# time (the JSONL step records after WARMUP, all repeats together, and the spread of the repeats'
# medians), the bytes per step that crossed the link, measured on the switch's ports (interface
# counters; the start-up measured by one 1-step run per variant and taken off), and the trainer's own
# count of the bytes between nodes (the JSONL comm record's cross_node_total_bytes; n/a where the
# build does not count them), side by side, with ratios against the first variant in the same run.
# A variant the trainer refuses (a build without ZeRO++) is one line saying so; the others still run.
# The first variant also runs on one node (all ranks in the machine's own namespace, no link) in the
# same alternation: the step when nothing crosses the link (ONE_NODE=0 leaves it out).
#
# Records bench/cluster_zeropp.txt with every run's wall time and the load average around it (not
# bench/measure.py's verdict: the ranks of the other nodes are not the launching command's
# descendants by the time it ends, so their CPU time would count as other processes'; and with the
# variants alternating, a load that changes meets them all). BENCH_SMOKE=1 writes it to out/bench/
# only. Variables:
#   NODES (2), SLOTS (2: ranks per node), RATES ("1gbit 200mbit"), REPEATS (3), STEPS (6), WARMUP (1)
#   MODEL ("--preset tiny --batch 4 --seq 64 --persistence-threshold 0": every unit gathered per use, as
#   in a model whose layers are past the persistence threshold; the data is data/brown/train.bin)
#   VARIANTS: lines "label|flags"; default ZeRO-3, +qwZ, +hpZ, +qgZ and all three (the flags below)
#   ONE_NODE (1)
#   BIN (build/z3/train_gpt_cpu), RECORD (cluster_zeropp.txt)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source-path=SCRIPTDIR/..
source bench/lib.sh
source scripts/cluster.sh
NODES=${NODES:-2}
SLOTS=${SLOTS:-2}
RATES=${RATES:-1gbit 200mbit}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-6}
WARMUP=${WARMUP:-1}
MODEL=${MODEL:---preset tiny --batch 4 --seq 64 --persistence-threshold 0}
BIN=${BIN:-build/z3/train_gpt_cpu}
RECORD=${RECORD:-cluster_zeropp.txt}
QW="--zero-quantized-weights 1" HP="--zero-hpz-partition-size $SLOTS" QG="--zero-quantized-gradients 1"
VARIANTS=${VARIANTS:-"ZeRO-3|
+qwZ|$QW
+hpZ|$HP
+qgZ|$QG
ZeRO++ (all three)|$QW $HP $QG"}
W=$((NODES * SLOTS))
die() { echo "cluster_zeropp: $*" >&2; exit 1; }
[ "$STEPS" -gt "$WARMUP" ] || die "STEPS=$STEPS must exceed WARMUP=$WARMUP"
[ -f data/brown/train.bin ] || make -s data || die "make data failed"
[ "$BIN" != build/z3/train_gpt_cpu ] || make -s build/z3/train_gpt_cpu || die "cannot build $BIN"
[ -x "$BIN" ] || die "$BIN: no such trainer"
read -r -a MODEL_FLAGS <<< "$MODEL"
labels=() flags=() where=()
while IFS='|' read -r label f; do
    [ -n "$label" ] || continue
    labels+=("$label"); flags+=("$f"); where+=(cluster)
done <<< "$VARIANTS"
[ ${#labels[@]} -gt 0 ] || die "VARIANTS names no variant"
# the first variant on one node, without the link: what the step costs when nothing crosses it
if [ "${ONE_NODE:-1}" = 1 ]; then labels+=("${labels[0]}, one node"); flags+=("${flags[0]}"); where+=(local); fi

CLUSTER_PREFIX=zcb$$
BG=""
trap '[ -n "$BG" ] && kill "$BG" 2> /dev/null; cluster_down' EXIT
trap 'exit 143' TERM INT HUP
bg() { "$@" & BG=$!; wait $BG; }

bench_init cluster_zeropp
bench_header "bench/cluster_zeropp.sh: step time and bytes between nodes of ZeRO-3 and ZeRO++ on a simulated cluster (network namespaces, a tc-shaped link), one run" \
    "other processes are not measured: every run's wall time and the load average around it are at the end"
say "# machine: $(hostname), kernel $(uname -r); $(mpirun --version | head -1); every node's ranks share this machine's $(nproc) cores"
export OMP_NUM_THREADS=1   # after the header: nproc counts it
say "# cluster: $NODES nodes x $SLOTS ranks (one OpenMP thread each), rates: $RATES (tc tbf on each node's link, both directions)"
say "# trainer: $BIN ${MODEL} --train data/brown/train.bin --steps $STEPS; $REPEATS repeats, variants alternating; first $WARMUP step(s) of each run excluded"
say "# link bytes: what the nodes sent into the switch (port rx counters, TCP/IP headers included), per step, the start-up taken off"
say "# floor: (nodes - 1) x the all-gather and reduce-scatter bytes one rank counted, the least any algorithm moves between nodes for them"
say "# counted: the trainer's cross_node_total_bytes (JSONL comm record, per rank) times the world: one step's bytes between nodes as the trainer counts them, all ranks together"

# the trainer refuses flags it does not know: asked once per variant, without running anything
accepted=()
for i in "${!labels[@]}"; do
    read -r -a F <<< "${flags[$i]}"
    if err=$("$BIN" "${MODEL_FLAGS[@]}" "${F[@]}" --estimate-memory "$W" 2>&1 > /dev/null); then accepted+=(ok)
    else accepted+=("refused by this build: $(echo "$err" | grep -m1 'error' || echo "$err" | head -1)"); fi
done

# train_run I STEPS LOG: variant I's trainer for STEPS steps, on the cluster or on one node
train_run() {
    local launch=("$CLUSTER_MPIRUN") F
    [ "${where[$1]}" = local ] && launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl "self,vader")
    read -r -a F <<< "${flags[$1]}"
    bg timeout 600 "${launch[@]}" -np "$W" -x OMP_NUM_THREADS "$BIN" "${MODEL_FLAGS[@]}" "${F[@]}" --steps "$2" \
        --train data/brown/train.bin --quiet 1 --log "$3.jsonl" > "$3.out" 2>&1 || die "${labels[$1]} failed (see $3.out)"
}

# link_check: a TCP transfer of about 2 s at the rate from node 1 to node 0, timed by the sender
# until node 0 has read every byte; prints goodput in Mbit/s
link_check() {
    local bytes=$(( $1 * 2 / 8 )) port=$((20000 + $$ % 10000))
    timeout 60 ip netns exec "$CLUSTER_PREFIX-n0" "$BENCH_PY" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
c.sendall(str(n).encode()); c.close()' "$CLUSTER_SUBNET.1" "$port" &
    local server=$!
    sleep 0.5
    timeout 60 ip netns exec "$CLUSTER_PREFIX-n1" "$BENCH_PY" -c '
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = socket.create_connection((host, port)); buf = b"x" * (1 << 20); t0 = time.time(); left = n
while left > 0:
    k = min(left, len(buf)); c.sendall(buf[:k]); left -= k
c.shutdown(socket.SHUT_WR); got = int(c.recv(64)); dt = time.time() - t0
print("%d bytes in %.2f s: %.1f Mbit/s" % (got, dt, got * 8 / dt / 1e6))' "$CLUSTER_SUBNET.1" "$port" "$bytes"
    wait "$server"
}

declare -A MED SPREAD LINK FLOOR COUNTED
for rate in $RATES; do
    cluster_up "$NODES" "$SLOTS" "$rate"
    rc=$?
    [ $rc -eq 77 ] && exit 77
    [ $rc -eq 0 ] || die "cluster_up failed"
    say ""
    say "## $CLUSTER_DESC"
    bits=$(_cluster_rate_bits "$rate")
    got=$(link_check "$bits")
    mbit=$(echo "$got" | sed -n 's/.*: \([0-9.]*\) Mbit\/s/\1/p')
    say "link check: $got = $(awk -v g="$mbit" -v r="$bits" 'BEGIN { printf "%.2f", g * 1e6 / r }') x the rate (TCP payload: below 1 by the headers' share, about 0.95)"
    # one 1-step run per variant: its start-up traffic and a warm-up of the caches
    declare -A START=()
    for i in "${!labels[@]}"; do
        [ "${accepted[$i]}" = ok ] || continue
        b0=$(cluster_link_bytes)
        train_run "$i" 1 "$BENCH_OUT/${rate}_v${i}_start"
        START[$i]=$(( $(cluster_link_bytes) - b0 ))
    done
    declare -A BYTES=()
    for ((rep = 1; rep <= REPEATS; rep++)); do
        for i in "${!labels[@]}"; do
            [ "${accepted[$i]}" = ok ] || continue
            b0=$(cluster_link_bytes)
            load0=$(cut -d' ' -f1-3 /proc/loadavg) t0=$(date +%s.%N)
            train_run "$i" "$STEPS" "$BENCH_OUT/${rate}_v${i}_r$rep"
            bytes=$(( $(cluster_link_bytes) - b0 ))
            BYTES[$i]="${BYTES[$i]:-} $bytes"
            echo "RUN $rate ${labels[$i]} #$rep: wall $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s | link $bytes bytes | load $load0 -> $(cut -d' ' -f1-3 /proc/loadavg)" >> "$BENCH_REPORT"
        done
    done
    cluster_down
    for i in "${!labels[@]}"; do
        [ "${accepted[$i]}" = ok ] || continue
        logs=() nodes=$NODES
        for ((rep = 1; rep <= REPEATS; rep++)); do logs+=("$BENCH_OUT/${rate}_v${i}_r$rep.jsonl"); done
        [ "${where[$i]}" = local ] && nodes=1
        read -r med spread link floor counted < <("$BENCH_PY" - "$WARMUP" "$STEPS" "${START[$i]}" "${BYTES[$i]}" "$nodes" \
            "${logs[@]}" <<'PY'
import json, statistics, sys
warmup, steps, start, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), [int(x) for x in sys.argv[4].split()]
nodes = int(sys.argv[5]); sys.argv.pop(5)
all_ms, medians, counted, floor = [], [], None, "n/a"
for path in sys.argv[5:]:
    recs = [json.loads(l) for l in open(path)]
    ms = [r["ms"] for r in recs if r.get("type") == "train" and r["step"] > warmup]
    all_ms += ms; medians.append(statistics.median(ms))
    comm = [r for r in recs if r.get("type") == "comm"]
    if comm and "cross_node_total_bytes" in comm[-1]:   # per rank in the record: all ranks together, as the link sees them
        counted = comm[-1]["cross_node_total_bytes"] * comm[-1]["world"]
    if comm:   # the least any algorithm moves between nodes for the all-gathers and reduce-scatters one rank counted
        b = comm[-1]["bytes_per_step"]; floor = "%.0f" % ((nodes - 1) * (b["all_gather"] + b["reduce_scatter"]))
link = statistics.median((b - start) / (steps - 1) for b in runs)   # the 1-step run's bytes: start-up and its one step
print("%.1f %.1f-%.1f %.0f %s %s" % (statistics.median(all_ms), min(medians), max(medians), link, floor, "n/a" if counted is None else "%.0f" % counted))
PY
        )
        MED[$rate,$i]=$med SPREAD[$rate,$i]=$spread LINK[$rate,$i]=$link FLOOR[$rate,$i]=$floor COUNTED[$rate,$i]=$counted
    done
done

say ""
say "median step time (ms) and bytes between nodes per step, measured on the link and counted by the trainer; ratios against ${labels[0]} in the same run"
hdr=$(printf "%-8s %-20s | %9s %15s | %12s %12s %12s | %7s %7s %7s" rate variant "step ms" "repeats' range" "link B/step" "floor" "counted" time link counted)
say "$hdr"
say "$(printf '%*s' ${#hdr} '' | tr ' ' '-')"
summary="cluster_zeropp ($NODES x $SLOTS):"
for rate in $RATES; do
    for i in "${!labels[@]}"; do
        if [ "${accepted[$i]}" != ok ]; then
            say "$(printf "%-8s %-20s | %s" "$rate" "${labels[$i]}" "${accepted[$i]}")"
            continue
        fi
        ratios=$(awk -v m="${MED[$rate,$i]}" -v m0="${MED[$rate,0]:-}" -v l="${LINK[$rate,$i]}" -v l0="${LINK[$rate,0]:-}" \
                     -v c="${COUNTED[$rate,$i]}" -v c0="${COUNTED[$rate,0]:-}" 'function r(a, b) { return (b + 0 > 0 && a != "n/a") ? sprintf("%.2fx", a / b) : "n/a" }
                     BEGIN { printf "%7s %7s %7s", r(m, m0), r(l, l0), r(c, c0) }')
        say "$(printf "%-8s %-20s | %9s %15s | %12s %12s %12s | %s" "$rate" "${labels[$i]}" "${MED[$rate,$i]}" "${SPREAD[$rate,$i]}" \
               "${LINK[$rate,$i]}" "${FLOOR[$rate,$i]}" "${COUNTED[$rate,$i]}" "$ratios")"
        summary="$summary $rate ${labels[$i]} ${MED[$rate,$i]} ms,"
    done
done
say ""
say "${summary%,}"
say ""
say "# load average at start $BENCH_LOAD0, at the end $(cut -d' ' -f1-3 /proc/loadavg); every run:"
sed 's/^/#   /' "$BENCH_REPORT" | tee -a "$BENCH_RECORD"
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
    { echo "# SMOKE RUN (BENCH_SMOKE=1): not a record"; cat "$BENCH_RECORD"; } > "$BENCH_OUT/$RECORD"
    echo "bench: smoke run: $BENCH_OUT/$RECORD (bench/$RECORD untouched)"
else
    cp "$BENCH_RECORD" "bench/$RECORD" && echo "bench: wrote bench/$RECORD"
fi
