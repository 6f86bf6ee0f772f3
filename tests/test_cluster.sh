#!/usr/bin/env bash
# A cluster on one machine (scripts/cluster.sh): 2 nodes x 2 ranks and 3 nodes x 2 ranks made of
# network namespaces, joined through a switch by a rate-limited link. mpirun starts on node 0 and
# reaches the other nodes through OpenSSH's ssh and the sshd of each node (sshd's log shows node 0's
# key accepted), as a hostfile launch does; scripts/launch/mpirun.sh, run on node 0, too. The CPU trainer
# at ZeRO-3 (every unit gathered per use) must train bitwise like a one-node run of the same world
# size, its start-up line must name the nodes, and the bytes the nodes sent into the switch
# (interface counters, measured outside the trainer) must be at least what ZeRO-3 has to move
# between nodes and well below the trainer's total counted traffic: the traffic within a node
# stays off the link. Also: an existing namespace of the cluster's name is refused and left
# alone, and nothing is left behind. ZeRO++ (all three parts) on 2 x 2 namespace nodes must train as on
# one node with the test-only node override, its cross-node count must equal its formula and the link must
# carry under half of ZeRO-3's bytes. No timing here: bench/cluster_zeropp.sh measures the link.
# The command line: a prefix is [A-Za-z0-9_-] matched literally, so '../..' removes nothing
# outside the script's state and 'abc.' touches no other cluster; a bad --rate is an error, not a
# skip; kill -9 of scripts/cluster.sh ends its command and removes the cluster (its watchdog).
# Skips (77) where network namespaces are not permitted (not root). tests/test_slurm.sh: Slurm.
cd "$(dirname "$0")/.." || exit 1
# shellcheck source-path=SCRIPTDIR/..
source tests/lib.sh
source scripts/cluster.sh
make -s build/z3/train_gpt_cpu || exit 1
TR=./build/z3/train_gpt_cpu
CLUSTER_PREFIX=zct$$   # unique: test runs in several checkouts may overlap
BG="" KILLED=""
trap '[ -n "$BG" ] && kill "$BG" 2> /dev/null; [ -n "$KILLED" ] && kill -9 "$KILLED" 2> /dev/null; cluster_down; rm -rf "$TMP"' EXIT
trap 'exit 143' TERM INT HUP
make_shard "$TMP/train.bin" 20000 250
STEPS=4
M=(--preset tiny --vocab 250 --batch 2 --seq 32 --steps "$STEPS" --lr 1e-3 --persistence-threshold 0 --train "$TMP/train.bin")
export OMP_NUM_THREADS=1

# runs in the background so that a signal reaches the trap at once
bg() { "$@" & BG=$!; wait $BG; }

echo "== the command line: names, rates"
mkdir -p "$TMP/victim/keep"
# /run/zeroc-cluster/../../$TMP/victim is $TMP/victim
bash scripts/cluster.sh down --prefix "../..$TMP/victim" > "$TMP/esc.out" 2>&1
rc=$?
[ $rc -eq 1 ] && [ -d "$TMP/victim/keep" ] && [ "$(wc -l < "$TMP/esc.out")" -eq 1 ] && grep -q "error: --prefix '../..$TMP/victim': expected" "$TMP/esc.out"
st=$?; check "down --prefix ../..$TMP/victim: refused (exit $rc), the folder is still there: $(cut -c1-90 "$TMP/esc.out")..." $st
for bad in "a b" "abc." "" "-n0" "$(printf 'x%.0s' $(seq 33))"; do
    bash scripts/cluster.sh down --prefix "$bad" > "$TMP/bad.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -q "error: --prefix" "$TMP/bad.out"; check "down --prefix '$bad': refused (exit $rc)" $?
done
bash scripts/cluster.sh --rate 1.5.3gbit -- true > "$TMP/rate.out" 2>&1
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$TMP/rate.out")" -eq 1 ] && grep -q "error: --rate 1.5.3gbit: a tc rate" "$TMP/rate.out"
st=$?; check "--rate 1.5.3gbit: one error line and exit 1 (got $rc; 77 would be a skip): $(cat "$TMP/rate.out")" $st
[ "$(_cluster_rate_bits 1.5mbit) $(_cluster_rate_bits 100MBIT) $(_cluster_rate_bits 1e9bit) $(_cluster_rate_bits 5gbps)" = "1500000 100000000 0 0" ]
check "rates: 1.5mbit and 100MBIT taken, 1e9bit and 5gbps not" $?

echo "== an existing namespace of the cluster's name is refused and left alone"
if ! ip netns add "$CLUSTER_PREFIX-n1" 2> /dev/null; then
    echo "skip: ip netns add is not permitted here (the simulated cluster needs root)"
    [ "$fails" -eq 0 ] || exit 1   # the checks of the command line above need no root
    exit 77
fi
cluster_up 2 2 1gbit > "$TMP/clobber.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "error: network namespaces $CLUSTER_PREFIX-n1 already exist" "$TMP/clobber.out" &&
    [ "$(_cluster_existing "$CLUSTER_PREFIX")" = "$CLUSTER_PREFIX-n1" ]
st=$?; check "cluster_up refuses (exit $rc): $(cut -c1-100 "$TMP/clobber.out")..." $st
CLUSTER_PREFIX=$CLUSTER_PREFIX bash scripts/cluster.sh -- true > "$TMP/clobber2.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "already exist" "$TMP/clobber2.out" && [ "$(_cluster_existing "$CLUSTER_PREFIX")" = "$CLUSTER_PREFIX-n1" ]
st=$?; check "scripts/cluster.sh refuses too (exit $rc), and its exit leaves the namespace alone" $st
ip netns del "$CLUSTER_PREFIX-n1"
# a prefix is a string, not a pattern: 'abc.' and 'abc' leave the namespaces of cluster 'abcd' alone
ip netns add "${CLUSTER_PREFIX}d-n0"
bash scripts/cluster.sh down --prefix "${CLUSTER_PREFIX}." > /dev/null 2>&1
bash scripts/cluster.sh down --prefix "$CLUSTER_PREFIX" > /dev/null 2>&1
[ "$(_cluster_existing "${CLUSTER_PREFIX}d")" = "${CLUSTER_PREFIX}d-n0" ] && [ -z "$(_cluster_existing "${CLUSTER_PREFIX}.")" ]
check "down --prefix ${CLUSTER_PREFIX}. and ${CLUSTER_PREFIX}: the namespace ${CLUSTER_PREFIX}d-n0 of another cluster is left alone" $?
ip netns del "${CLUSTER_PREFIX}d-n0"

echo "== kill -9 of scripts/cluster.sh ends its command and the cluster"
K=${CLUSTER_PREFIX}k
CLUSTER_PREFIX=$K bash scripts/cluster.sh -- sleep 600 > "$TMP/k.out" 2>&1 &
KILLED=$!
for _ in $(seq 300); do grep -q "up:" "$TMP/k.out" && break; kill -0 $KILLED 2> /dev/null || break; sleep 0.2; done
sleeper=$(pgrep -P $KILLED -x sleep)
[ -n "$sleeper" ]; check "scripts/cluster.sh -- sleep 600: up, the command runs (pid $sleeper)" $?
kill -9 $KILLED; wait $KILLED 2> /dev/null; KILLED=""
for _ in $(seq 100); do [ -z "$(_cluster_existing "$K")" ] && ! kill -0 "$sleeper" 2> /dev/null && break; sleep 0.2; done
[ -n "$sleeper" ] && [ -z "$(_cluster_existing "$K")" ] && [ ! -e "$CLUSTER_STATE_ROOT/$K" ] && ! kill -0 "$sleeper" 2> /dev/null
check "after kill -9: the command ended, no namespace $K-*, no state" $?

# one_case NODES SLOTS: the trainer on the cluster against one node
one_case() {
    local nodes=$1 slots=$2 W=$(($1 * $2)) rc
    echo "== $nodes nodes x $slots ranks, 1gbit between nodes"
    # shellcheck disable=SC2086  # MPIRUN is a command with its flags (tests/lib.sh)
    bg timeout 120 $MPIRUN -np $W -x OMP_NUM_THREADS $TR "${M[@]}" --log "$TMP/one$W.jsonl" > "$TMP/one$W.out" 2>&1 || { cat "$TMP/one$W.out"; return 1; }
    cluster_up "$nodes" "$slots" 1gbit || return $?
    echo "  $CLUSTER_DESC"
    local before after
    before=$(cluster_link_bytes)
    bg timeout 120 "$CLUSTER_MPIRUN" -np $W -x OMP_NUM_THREADS $TR "${M[@]}" --log "$TMP/c$W.jsonl" > "$TMP/c$W.out" 2>&1
    rc=$?
    after=$(cluster_link_bytes)
    local accepted=0 sshlog=$CLUSTER_STATE/ssh/sshd.n$((nodes - 1)).log
    [ "$CLUSTER_LAUNCH" = ssh ] && accepted=$(grep -c "Accepted publickey for root from $CLUSTER_SUBNET.1 " "$sshlog")
    [ "$nodes" -eq 2 ] && mpirun_sh_case
    cluster_down
    echo $((after - before)) > "$TMP/link$W"
    [ $rc -eq 0 ]; st=$?; check "the trainer ran on the cluster (exit $rc)" $st
    [ $st -eq 0 ] || { head -30 "$TMP/c$W.out"; return 0; }
    if [ -x /usr/sbin/sshd ]; then
        # one login is cluster_up's check that node 0 reaches the node; mpirun's is another
        [ "$CLUSTER_LAUNCH" = ssh ] && [ "$accepted" -ge 2 ]
        check "mpirun reached $CLUSTER_PREFIX-n$((nodes - 1)) through ssh: its sshd accepted node 0's key $accepted times" $?
    else
        echo "  note: no /usr/sbin/sshd (openssh-server): mpirun went through the stand-in for ssh"
    fi
    local names="" i
    for ((i = 0; i < nodes; i++)); do names+="${i:+ | }$CLUSTER_PREFIX-n$i ranks $((i * slots))-$((i * slots + slots - 1))"; done
    names=${names# | }
    grep -q "$nodes nodes: $names$" "$TMP/c$W.out" && ! grep -q "warning" "$TMP/c$W.out"; st=$?
    check "start-up line: $(grep -m1 "nodes:" "$TMP/c$W.out" | sed 's/^ *//') (Open MPI's local ranks agree: no warning)" $st
    # bitwise: the JSONL losses as written (round-trip precision)
    diff <(grep -o '"loss":[^,]*' "$TMP/one$W.jsonl") <(grep -o '"loss":[^,]*' "$TMP/c$W.jsonl") > /dev/null &&
        [ "$(grep -c '"loss"' "$TMP/c$W.jsonl")" -eq $STEPS ]
    st=$?; check "$STEPS losses equal the one-node run's bitwise: $(grep -o '"loss":[^,]*' "$TMP/c$W.jsonl" | cut -d: -f2 | tr '\n' ' ')" $st
    # A collective among the nodes has every node receive the parts it lacks (an all-gather) or
    # send the parts others own (a reduce-scatter): (nodes-1)/nodes of the buffer per node, so the
    # link carries at least (nodes-1) x the bytes one rank counts for them. Start-up, the daemons'
    # messages and TCP/IP headers only add. The whole world's counted traffic is W x that count;
    # the link carries about half of it here, 0.82 with every rank a node of its own (4 x 1).
    $PY - "$TMP/c$W.jsonl" $((after - before)) "$nodes" "$W" $STEPS <<'PYEOF'
import json, sys
path, link, nodes, world, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
comm = [r for r in map(json.loads, open(path)) if r.get("type") == "comm"][-1]
b = comm["bytes_per_step"]
must = (nodes - 1) * (b["all_gather"] + b["reduce_scatter"]) * steps
total = world * comm["total_bytes"] * steps
counted = comm.get("cross_node_total_bytes")
print(f"       link {link} bytes over {steps} steps; ZeRO-3 must move {must:.0f} between {nodes} nodes; "
      f"the ranks counted {total:.0f} in all (link/all = {link / total:.2f})"
      + (f"; counted crossing nodes {counted * steps:.0f}" if counted is not None else ""))
ok_low, ok_high = link >= must, link <= 0.75 * total
print(f"  {'ok  ' if ok_low else 'FAIL'} the link carried at least what ZeRO-3 must move between nodes")
print(f"  {'ok  ' if ok_high else 'FAIL'} the traffic within a node stayed off the link (link <= 0.75 x all counted)")
sys.exit(0 if ok_low and ok_high else 1)
PYEOF
    st=$?; [ $st -eq 0 ] || fails=$((fails + 1))
}
# scripts/launch/mpirun.sh typed on node 0 with the cluster's hostfile: a plain mpirun over ssh
mpirun_sh_case() {
    local rc log
    "$CLUSTER_NODE0" env HOSTFILE="$CLUSTER_HOSTFILE" ZEROC_BIN=$TR LOGDIR="$TMP/mlogs" OMP_NUM_THREADS=1 \
        MPIRUN_FLAGS="--allow-run-as-root --oversubscribe --mca btl self,vader,tcp" \
        timeout 120 bash scripts/launch/mpirun.sh "${M[@]}" > "$TMP/msh.out" 2>&1
    rc=$?
    log=$(find "$TMP/mlogs" -name 'zeroc_*.jsonl' 2> /dev/null | head -1)
    [ $rc -eq 0 ] && grep -q "2 nodes: $CLUSTER_PREFIX-n0 ranks 0-1 | $CLUSTER_PREFIX-n1 ranks 2-3$" "$TMP/msh.out" &&
        diff <(grep -o '"loss":[^,]*' "$TMP/one4.jsonl") <(grep -o '"loss":[^,]*' "$log") > /dev/null
    st=$?; check "scripts/launch/mpirun.sh on node 0 ($(head -1 "$TMP/msh.out" | cut -c1-60)...): the one-node losses, bitwise" $st
    [ $st -eq 0 ] || head -20 "$TMP/msh.out"
}
# ZeRO++ (all three parts) on 2 namespace nodes x 2 ranks, the nodes found by MPI's shared-memory split:
# the same losses, bitwise, as on one node with the test-only ZEROC_RANKS_PER_NODE=2 (tests/test_zeropp.sh's
# way), the trainer's cross-node count equal to its formula, and the link carrying a fraction of plain ZeRO-3's
# bytes (the counted reduction is about 8x at this size; the link's own bytes include TCP/IP headers and the
# launcher's messages, so the check asks for under half).
zeropp_case() {
    local W=4 rc before after z3link
    local ZPP=(--zero-quantized-weights 1 --zero-hpz-partition-size 2 --zero-quantized-gradients 1)
    echo "== ZeRO++ (qwZ, hpZ, qgZ) on 2 nodes x 2 ranks, 1gbit between nodes"
    # shellcheck disable=SC2086  # MPIRUN is a command with its flags (tests/lib.sh)
    bg timeout 120 $MPIRUN -np $W -x OMP_NUM_THREADS -x ZEROC_RANKS_PER_NODE=2 $TR "${M[@]}" "${ZPP[@]}" --log "$TMP/zpp_one.jsonl" \
        > "$TMP/zpp_one.out" 2>&1 || { cat "$TMP/zpp_one.out"; return 1; }
    cluster_up 2 2 1gbit || return $?
    before=$(cluster_link_bytes)
    bg timeout 120 "$CLUSTER_MPIRUN" -np $W -x OMP_NUM_THREADS $TR "${M[@]}" "${ZPP[@]}" --log "$TMP/zpp_c.jsonl" > "$TMP/zpp_c.out" 2>&1
    rc=$?
    after=$(cluster_link_bytes)
    cluster_down
    [ $rc -eq 0 ]; st=$?; check "ZeRO++ ran on the cluster (exit $rc)" $st
    [ $st -eq 0 ] || { head -30 "$TMP/zpp_c.out"; return 0; }
    diff <(grep -o '"loss":[^,]*' "$TMP/zpp_one.jsonl") <(grep -o '"loss":[^,]*' "$TMP/zpp_c.jsonl") > /dev/null &&
        [ "$(grep -c '"loss"' "$TMP/zpp_c.jsonl")" -eq $STEPS ]
    st=$?; check "ZeRO++ on the namespace nodes: the losses of one node with ZEROC_RANKS_PER_NODE=2, bitwise" $st
    z3link=$(cat "$TMP/link4")
    $PY - "$TMP/zpp_c.jsonl" $((after - before)) "$z3link" <<'PYEOF'
import json, sys
path, link, z3 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = [r for r in map(json.loads, open(path)) if r.get("type") == "comm"][-1]
print(f"       {c['nodes']} nodes x {c['ranks_per_node']} (MPI's split); counted crossing nodes {c['cross_node_total_bytes']:.0f} B per rank "
      f"per step, formula {c['theory_cross_node_total_bytes']:.0f}; link {link} bytes, plain ZeRO-3's {z3} ({link / z3:.2f}x)")
ok = [c["nodes"] == 2 and c["ranks_per_node"] == 2, c["cross_node_total_bytes"] == c["theory_cross_node_total_bytes"], link < 0.5 * z3]
for good, what in zip(ok, ["the nodes come from MPI's shared-memory split", "the counted cross-node bytes equal the formula",
                           "the link carried under half of plain ZeRO-3's bytes"]):
    print(f"  {'ok  ' if good else 'FAIL'} {what}")
sys.exit(0 if all(ok) else 1)
PYEOF
    st=$?; [ $st -eq 0 ] || fails=$((fails + 1))
}

# ZeRO++'s bytes on the wire: per variant, the link's bytes of a 1-step and a 4-step run, so that start-up and
# shutdown cancel: (4-step - 1-step) / 3 is one step's. The formula is the plan's cross-node bytes by collective
# (the comm record's theory_*, per rank, the whole group's buffer as counted) times what Open MPI's algorithms
# put on the link at 2 nodes x 2 ranks: a world all-gather sends every block to each rank of the other node,
# (W - L) / W of the counted bytes; the world reduce-scatter is a ring, N (W - 1) / W^2; an all-to-all or a gather
# among the nodes (N - 1) / N; hpZ's gathers within a node nothing. Each within 5% (TCP/IP headers add 0.5-3%
# here), and so is what each part takes off ZeRO-3's bytes: qgZ sending int8 takes 9% less than its formula and
# all three 22% over; hpZ gathering across nodes every micro-step is 76% over at --accum 4.
zeropp_wire_case() {
    local ZPP="--zero-quantized-weights 1 --zero-hpz-partition-size 2 --zero-quantized-gradients 1" name flags steps b
    echo "== ZeRO++ on the wire: each part and all three, 2 nodes x 2 ranks, 1gbit"
    cluster_up 2 2 1gbit || return $?
    : > "$TMP/wire.txt"
    while IFS='|' read -r name flags; do
        for steps in 1 4; do
            b=$(cluster_link_bytes)
            # shellcheck disable=SC2086  # the variant's flags
            bg timeout 120 "$CLUSTER_MPIRUN" -np 4 -x OMP_NUM_THREADS $TR "${M[@]}" --steps $steps $flags --log "$TMP/w_$name.$steps.jsonl" \
                < /dev/null > "$TMP/w_$name.$steps.out" 2>&1 || { echo "  $name: exit $?"; tail -3 "$TMP/w_$name.$steps.out"; }
            echo "$name $steps $(($(cluster_link_bytes) - b))" >> "$TMP/wire.txt"
        done
    done <<EOV
ZeRO-3|
qwZ|--zero-quantized-weights 1
hpZ|--zero-hpz-partition-size 2
hpZ_accum4|--zero-hpz-partition-size 2 --accum 4
qgZ|--zero-quantized-gradients 1
all_three|$ZPP
EOV
    cluster_down
    $PY - "$TMP" <<'PYEOF'
import json, sys
T = sys.argv[1]
link = {}
for line in open(f"{T}/wire.txt"):
    n, s, b = line.split(); link.setdefault(n, {})[int(s)] = int(b)
W, L, N = 4, 2, 2
factor = {"all_gather": (W - L) / W, "reduce_scatter": N * (W - 1) / W**2, "all_to_all": (N - 1) / N, "all_reduce": (N - 1) / N}
fails, wire = 0, {}
for n, d in link.items():
    try:
        c = [json.loads(l) for l in open(f"{T}/w_{n}.4.jsonl") if '"type":"comm"' in l][-1]
    except (OSError, IndexError) as e:
        print(f"  FAIL {n}: no comm record ({e})"); fails += 1; continue
    th = c["theory_cross_node_bytes_per_step"]
    formula = sum(W * th[k] * factor[k] for k in th)
    per = (d[4] - d[1]) / 3
    wire[n] = (per, formula, W * th["reduce_scatter"] * factor["reduce_scatter"], c)
    ok = abs(per / formula - 1) <= 0.05
    fails += not ok
    print(f"  {'ok  ' if ok else 'FAIL'} {n}: {per:.0f} bytes per step on the link, formula {formula:.0f} ({per / formula - 1:+.1%}); "
          f"{c['cross_node_m']:.3f}M per step as zeroc counts, the paper {c['paper_cross_node_m']:.2f}M per iteration")
# each part's own effect: what it takes off ZeRO-3's bytes on the link, against the formula's
for n in ("qwZ", "hpZ", "qgZ", "all_three"):
    if n not in wire or "ZeRO-3" not in wire: continue
    cut, f_cut = wire["ZeRO-3"][0] - wire[n][0], wire["ZeRO-3"][1] - wire[n][1]
    ok = abs(cut / f_cut - 1) <= 0.05
    fails += not ok
    print(f"  {'ok  ' if ok else 'FAIL'} {n} takes {cut:.0f} bytes per step off ZeRO-3's on the link, the formula {f_cut:.0f} ({cut / f_cut - 1:+.1%})")
try:   # hpZ at --accum 4: the 3 more micro-steps add reduce-scatters only, no gather across nodes
    (p1, _, rs1, _), (p4, _, rs4, _) = wire["hpZ"], wire["hpZ_accum4"]
    extra, rs_extra = p4 - p1, rs4 - rs1
    ok = abs(extra - rs_extra) <= 0.05 * p4
    fails += not ok
    print(f"  {'ok  ' if ok else 'FAIL'} hpZ --accum 4 against --accum 1: {extra:.0f} more bytes per step on the link, the 3 more "
          f"reduce-scatters' {rs_extra:.0f}: the gathers cross the link once per step")
except KeyError as e:
    print(f"  FAIL hpZ's runs ({e})"); fails += 1
sys.exit(1 if fails else 0)
PYEOF
    st=$?; [ $st -eq 0 ] || fails=$((fails + 1))
}

for shape in "2 2" "3 2"; do
    # shellcheck disable=SC2086  # NODES SLOTS
    one_case $shape
    rc=$?
    [ $rc -eq 77 ] && exit 77
    [ $rc -eq 0 ] || check "cluster_up $shape (exit $rc)" 1
done
zeropp_case
rc=$?
[ $rc -eq 0 ] || check "cluster_up 2 2 for ZeRO++ (exit $rc)" 1
zeropp_wire_case
rc=$?
[ $rc -eq 0 ] || check "cluster_up 2 2 for ZeRO++'s wire bytes (exit $rc)" 1

[ -z "$(_cluster_existing "$CLUSTER_PREFIX")" ] && [ ! -e "$CLUSTER_STATE_ROOT/$CLUSTER_PREFIX" ]
check "nothing left behind: no namespace $CLUSTER_PREFIX-*, no state" $?
[ "$fails" -eq 0 ]
