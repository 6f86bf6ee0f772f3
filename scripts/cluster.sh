#!/usr/bin/env bash
# scripts/cluster.sh: a cluster of 2-8 "nodes" on one Linux machine, made of network namespaces,
# with a rate-limited link between the nodes and the fast path inside each node. Open MPI launches
# across them as on a real cluster: a hostfile names the nodes, and a stand-in for ssh starts
# mpirun's daemon inside the named node's namespace. See docs/cluster.md.
#
#   sudo bash scripts/cluster.sh --nodes 2 --slots 2 --rate 1gbit -- CMD ARGS...   # up, CMD, down
#   sudo bash scripts/cluster.sh down [--prefix zc]                                  # remove leftovers
#
# CMD runs in the machine's own namespace with these in its environment:
#   CLUSTER_MPIRUN      mpirun on node 0 with the hostfile and the cluster's flags: add -np and the program
#   CLUSTER_LINK_BYTES  prints the bytes the nodes have sent into the switch so far (all of them crossed
#                       the link between nodes: the traffic inside a node never reaches it)
#   CLUSTER_HOSTFILE, CLUSTER_NODES, CLUSTER_SLOTS, CLUSTER_RATE, CLUSTER_DESC (one line describing it)
#
# Layout. Node i is the namespace PREFIX-n<i>: its ranks are processes inside it, so they reach
# each other through shared memory (Open MPI's vader) and loopback. Its one interface, eth0
# (10.213.7.<i+1>/24), is a veth pair whose other end is a port of the switch, a bridge in the
# namespace PREFIX-hub. tc's token bucket filter (tbf) limits both directions of every port: a
# node's NIC at RATE, full duplex. mpirun runs on node 0 (in its namespace), as on a real cluster;
# the daemons of the other nodes are started through the stand-in for ssh, which enters the
# node's namespace and gives it its own host name (a UTS namespace) so comm/launch.h names it.
# Open MPI's TCP traffic between nodes is restricted to the 10.213.7.0/24 interfaces.
#
# Sourced, it defines cluster_up NODES SLOTS RATE, cluster_down and cluster_link_bytes for a
# script that runs several commands on one cluster (tests/test_cluster.sh, bench/cluster_zeropp.sh);
# the caller's EXIT trap calls cluster_down. Either way a watchdog removes the cluster if the
# process that made it dies without doing so (kill -9), and an existing namespace of the same
# name is never touched unless the cluster it belongs to is known to be dead.
#
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 (ip, tc), util-linux (unshare) and a
# kernel with veth, bridge and sch_tbf. Without permission it exits 77 (tests count that a skip).

CLUSTER_PREFIX=${CLUSTER_PREFIX:-zc}
CLUSTER_SUBNET=10.213.7
CLUSTER_STATE_ROOT=/run/zeroc-cluster
_cluster_self=$(readlink -f "${BASH_SOURCE[0]}")

_cluster_say() { echo "cluster.sh: $*" >&2; }

# whether process PID runs (a zombie, killed but not yet reaped, does not)
_cluster_alive() {
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ]
}

# the namespaces of a cluster with this prefix that exist now
_cluster_existing() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(hub|n[0-9]+)$"
}

# cluster_down [PREFIX]: ends every process inside the cluster's namespaces (mpirun, its daemons,
# the ranks), deletes the namespaces (their veths and the bridge go with them) and the state.
# Without PREFIX, the cluster this process made, if any: never one that cluster_up refused to touch.
cluster_down() {
    local prefix=${1:-${CLUSTER_ACTIVE_PREFIX:-}} ns pids
    [ -n "$prefix" ] || return 0
    local state="$CLUSTER_STATE_ROOT/$prefix"
    rm -f "$state/up"   # tells the watchdog that the owner cleans up
    for ns in $(_cluster_existing "$prefix"); do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086  # a list of process ids
        [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    done
    for ns in $(_cluster_existing "$prefix"); do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
            sleep 0.2
        done
        pids=$(ip netns pids "$ns" 2>/dev/null)
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    if [ -f "$state/watchdog" ]; then
        local w; w=$(cat "$state/watchdog")
        [ "$w" != "$$" ] && kill "$w" 2>/dev/null
    fi
    rm -rf "$state"
    [ "${CLUSTER_ACTIVE_PREFIX:-}" = "$prefix" ] && unset CLUSTER_ACTIVE_PREFIX
    return 0
}

# cluster_link_bytes [PREFIX]: bytes the nodes have sent into the switch (each port's rx counter)
cluster_link_bytes() {
    local prefix=${1:-${CLUSTER_ACTIVE_PREFIX:-$CLUSTER_PREFIX}}
    ip netns exec "$prefix-hub" sh -c 'cat /sys/class/net/port*/statistics/rx_bytes' | awk '{s += $1} END {printf "%.0f\n", s}'
}

# rate in bits per second from tc's notation (1gbit, 100mbit, 500kbit, 1000000bit)
_cluster_rate_bits() {
    echo "$1" | awk '{ r = tolower($0); n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
        m = (u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : -1)
        if (n <= 0 || m < 0) print 0; else printf "%.0f\n", n * m }'
}

# cluster_up NODES SLOTS RATE: builds the cluster and writes its files; 0 when up, 77 when this
# machine does not permit network namespaces, 1 on any other failure (nothing left behind).
cluster_up() {
    local nodes=$1 slots=$2 rate=$3 prefix=$CLUSTER_PREFIX i ns
    local state="$CLUSTER_STATE_ROOT/$prefix"
    case "$nodes" in [2-8]) ;; *) _cluster_say "error: --nodes $nodes: between 2 and 8"; return 1 ;; esac
    case "$slots" in [1-9]|[1-9][0-9]) ;; *) _cluster_say "error: --slots $slots: a positive count"; return 1 ;; esac
    local bits=0
    if [ "$rate" != none ]; then
        bits=$(_cluster_rate_bits "$rate")
        [ "$bits" -gt 0 ] || { _cluster_say "error: --rate $rate: a tc rate such as 1gbit, 100mbit, 500kbit, or none"; return 1; }
    fi
    local tool
    for tool in ip tc unshare mpirun; do
        command -v "$tool" > /dev/null || { _cluster_say "skip: $tool is not installed"; return 77; }
    done
    # a namespace of this name already exists: ours, from a dead owner, is removed; anything else is refused
    if [ -n "$(_cluster_existing "$prefix")" ]; then
        local owner=""; [ -f "$state/owner" ] && owner=$(cat "$state/owner")
        if [ -n "$owner" ] && ! _cluster_alive "$owner"; then
            _cluster_say "removing the cluster '$prefix' left by process $owner, which is gone"
            cluster_down "$prefix"
        else
            _cluster_say "error: network namespaces $(_cluster_existing "$prefix" | tr '\n' ' ')already exist${owner:+ (cluster of process $owner, still running)}; not touching them. Another prefix: CLUSTER_PREFIX=name; leftovers of an earlier run: bash scripts/cluster.sh down --prefix $prefix"
            return 1
        fi
    fi
    local err
    if ! err=$(ip netns add "$prefix-hub" 2>&1); then
        _cluster_say "skip: ip netns add is not permitted here (${err%%$'\n'*}); the simulated cluster needs root"
        return 77
    fi
    CLUSTER_ACTIVE_PREFIX=$prefix
    # what the nodes need beyond the namespace: their own host names, and the rate limit
    if ! err=$(ip netns exec "$prefix-hub" unshare --uts true 2>&1); then
        ip netns del "$prefix-hub"
        _cluster_say "skip: unshare --uts is not permitted here (${err%%$'\n'*}); the nodes need their own host names"
        return 77
    fi
    if [ "$bits" -gt 0 ] && ! err=$(ip -n "$prefix-hub" link add probe0 type veth peer name probe1 2>&1 &&
                                    tc -n "$prefix-hub" qdisc add dev probe0 root tbf rate "$rate" burst 32768 latency 400ms 2>&1); then
        ip netns del "$prefix-hub"
        _cluster_say "skip: tc's token bucket filter is not available here (${err%%$'\n'*}; the kernel's sch_tbf); --rate none runs unshaped"
        return 77
    fi
    ip -n "$prefix-hub" link del probe0 2> /dev/null
    mkdir -p "$state" && echo "$$" > "$state/owner" && touch "$state/up"
    # the watchdog: removes the cluster when its owner dies without doing so
    # shellcheck disable=SC2016  # expanded by the watchdog's shell
    setsid bash -c "$(declare -f _cluster_alive)"'
                    while _cluster_alive "$1" && [ -e "$2/up" ]; do sleep 0.5; done
                    [ -e "$2/up" ] && CLUSTER_PREFIX=$3 bash "$4" down --prefix "$3"' \
        cluster-watchdog "$$" "$state" "$prefix" "$_cluster_self" > /dev/null 2>&1 < /dev/null &
    echo $! > "$state/watchdog"

    local burst=$((bits / 8 / 250))
    [ "$burst" -lt 32768 ] && burst=32768   # at least 4 ms of the rate, and more than one 64 KB GSO packet's worth
    _cluster_run() { "$@" || { _cluster_say "error: failed: $*"; return 1; }; }
    _cluster_run ip -n "$prefix-hub" link add br0 type bridge || { cluster_down "$prefix"; return 1; }
    _cluster_run ip -n "$prefix-hub" link set br0 up || { cluster_down "$prefix"; return 1; }
    for ((i = 0; i < nodes; i++)); do
        ns=$prefix-n$i
        { _cluster_run ip netns add "$ns" &&
          _cluster_run ip link add name eth0 netns "$ns" type veth peer name "port$i" netns "$prefix-hub" &&
          _cluster_run ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 &&
          _cluster_run ip -n "$ns" addr add "$CLUSTER_SUBNET.$((i + 1))/24" dev eth0 &&
          _cluster_run ip -n "$ns" link set lo up && _cluster_run ip -n "$ns" link set eth0 up &&
          _cluster_run ip -n "$prefix-hub" link set "port$i" master br0 up; } || { cluster_down "$prefix"; return 1; }
        if [ "$bits" -gt 0 ]; then
            { _cluster_run tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 400ms &&
              _cluster_run tc -n "$prefix-hub" qdisc add dev "port$i" root tbf rate "$rate" burst "$burst" latency 400ms; } ||
                { cluster_down "$prefix"; return 1; }
        fi
    done
    ip netns exec "$prefix-hub" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 2>/dev/null

    # the hostfile, the stand-in for ssh, and mpirun on node 0
    : > "$state/hostfile"
    for ((i = 0; i < nodes; i++)); do echo "$prefix-n$i slots=$slots" >> "$state/hostfile"; done
    cat > "$state/ssh" <<'SH'
#!/bin/sh
# stands in for ssh: drops the options, enters the node's namespace with its own host name and
# runs the command there, as sshd's shell would
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
SH
    # rtc_hwloc_vmhole none: see tests/test_launch.sh (orted's hwloc shared-memory topology)
    cat > "$state/mpirun" <<SH
#!/bin/sh
# mpirun on node 0 of the simulated cluster '$prefix'; add -np and the program
exec ip netns exec $prefix-n0 unshare --uts sh -c 'hostname "\$0" && exec mpirun "\$@"' $prefix-n0 \\
    --allow-run-as-root --oversubscribe --hostfile $state/hostfile --map-by ppr:$slots:node --bind-to none \\
    --mca plm_rsh_agent $state/ssh --mca btl self,vader,tcp --mca btl_tcp_if_include $CLUSTER_SUBNET.0/24 \\
    --mca oob_tcp_if_include $CLUSTER_SUBNET.0/24 --mca rtc_hwloc_vmhole none "\$@"
SH
    chmod +x "$state/ssh" "$state/mpirun"
    export CLUSTER_MPIRUN=$state/mpirun CLUSTER_HOSTFILE=$state/hostfile CLUSTER_NODES=$nodes CLUSTER_SLOTS=$slots
    export CLUSTER_RATE=$rate CLUSTER_LINK_BYTES="bash $_cluster_self link-bytes --prefix $prefix"
    CLUSTER_DESC="$nodes nodes x $slots ranks (namespaces $prefix-n0..$((nodes - 1))), link between nodes: $([ "$bits" -gt 0 ] && echo "$rate per node each way (tc tbf, burst $burst bytes)" || echo "unshaped veth")"
    export CLUSTER_DESC
    return 0
}

# ----------------------------------------------------------------------------
# the command line (not when sourced)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
    mode=run nodes=2 slots=2 rate=1gbit
    case "${1:-}" in down|link-bytes) mode=$1; shift ;; -h|--help) usage ;; esac
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes) nodes=$2; shift 2 ;;
            --slots) slots=$2; shift 2 ;;
            --rate) rate=$2; shift 2 ;;
            --prefix) CLUSTER_PREFIX=$2; shift 2 ;;
            --) shift; break ;;
            *) _cluster_say "error: unknown argument '$1' (see --help)"; exit 1 ;;
        esac
    done
    case "$mode" in
        down) cluster_down "$CLUSTER_PREFIX"; exit 0 ;;
        link-bytes) cluster_link_bytes "$CLUSTER_PREFIX"; exit $? ;;
    esac
    [ $# -gt 0 ] || { _cluster_say "error: no command after -- (see --help)"; exit 1; }
    command_pid=""
    trap '[ -n "$command_pid" ] && kill "$command_pid" 2> /dev/null; cluster_down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM HUP
    cluster_up "$nodes" "$slots" "$rate" || exit $?
    _cluster_say "up: $CLUSTER_DESC"
    # in the background, so that a signal ends the wait (the command and the cluster) at once
    "$@" &
    command_pid=$!
    wait $command_pid
fi
