#!/usr/bin/env bash
# scripts/cluster.sh: a cluster of 2-8 "nodes" on one Linux machine, made of network namespaces,
# with a rate-limited link between the nodes and the fast path inside each node. Every node runs
# OpenSSH's sshd, so mpirun reaches the nodes of its hostfile through ssh as on a real cluster;
# with --slurm a head node runs munged and slurmctld and every node slurmd. See docs/cluster.md.
#
#   sudo bash scripts/cluster.sh --nodes 2 --slots 2 --rate 1gbit [--slurm] -- CMD ARGS...   # up, CMD, down
#   sudo bash scripts/cluster.sh down [--prefix zc]                                          # remove leftovers
#
# CMD runs in the machine's own namespace with these in its environment:
#   CLUSTER_MPIRUN      mpirun on node 0 with the hostfile and the cluster's flags: add -np and the program
#   CLUSTER_LINK_BYTES  prints the bytes the nodes have sent into the switch so far (all of them crossed
#                       the link between nodes: the traffic inside a node never reaches it)
#   CLUSTER_NODE0       runs a command on node 0, where a plain mpirun --hostfile reaches the nodes by ssh
#   CLUSTER_SLURM_BIN   with --slurm: a folder of Slurm's commands (sbatch, squeue, ...) run on the head node
#   CLUSTER_HOSTFILE, CLUSTER_NODES, CLUSTER_SLOTS, CLUSTER_RATE, CLUSTER_STATE (the cluster's files),
#   CLUSTER_LAUNCH (ssh, or stand-in where sshd cannot run), CLUSTER_DESC (one line describing it)
#
# Layout. Node i is the namespace PREFIX-n<i> with the host name PREFIX-n<i>: its ranks are
# processes inside it, so they reach each other through shared memory (Open MPI's vader) and
# loopback. Its one interface, eth0 (10.213.7.<i+1>/24), is a veth pair whose other end is a port
# of the switch, a bridge in the namespace PREFIX-hub. tc's token bucket filter (tbf) limits both
# directions of every port: a node's NIC at RATE, full duplex. mpirun runs on node 0, as on a real
# cluster. The head node PREFIX-head (10.213.7.254, unshaped) exists with --slurm only. Open MPI's
# TCP traffic between nodes is restricted to the 10.213.7.0/24 interfaces.
#
# Sourced, it defines cluster_up NODES SLOTS RATE [slurm], cluster_down and cluster_link_bytes for a
# script that runs several commands on one cluster (tests/test_cluster.sh, tests/test_slurm.sh,
# bench/cluster_zeropp.sh); the caller's EXIT trap calls cluster_down. Either way a watchdog removes
# the cluster, and ends CMD, if the process that made it dies without doing so (kill -9), and an
# existing namespace of the same name is never touched unless its cluster's owner is dead.
# PREFIX is [A-Za-z0-9_-], at most 32 characters, matched literally. The cluster's files, its
# daemons' logs among them, are in /run/zeroc-cluster/PREFIX; CLUSTER_KEEP_STATE=1 keeps them after down.
#
# Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2 (ip, tc), util-linux (unshare, setsid) and
# a kernel with veth, bridge and sch_tbf; openssh-server, and for --slurm slurmctld, slurmd,
# slurm-client and munge. Without permission it exits 77 (tests count that a skip).

CLUSTER_PREFIX=${CLUSTER_PREFIX:-zc}
CLUSTER_SUBNET=10.213.7
CLUSTER_STATE_ROOT=/run/zeroc-cluster
_cluster_self=$(readlink -f "${BASH_SOURCE[0]}")
# shellcheck source=scripts/cluster_daemons.sh
source "${_cluster_self%/*}/cluster_daemons.sh"

_cluster_say() { echo "cluster.sh: $*" >&2; }

# whether PREFIX is a name this script makes: it becomes namespace, host and file names
_cluster_prefix_ok() {
    [[ $1 =~ ^[A-Za-z0-9_-]{1,32}$ ]] && [[ $1 != -* ]] && return 0
    _cluster_say "error: --prefix '$1': expected 1-32 characters of A-Z a-z 0-9 _ -, not starting with -"
    return 1
}

# whether process PID runs (a zombie, killed but not yet reaped, does not)
_cluster_alive() {
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ]
}

# the namespaces of a cluster with this prefix that exist now; the prefix is compared as a string
_cluster_existing() {
    local name
    ip netns list 2>/dev/null | awk '{print $1}' | while read -r name; do
        case "$name" in
            "$1-hub"|"$1-head") echo "$name" ;;
            "$1-n"*) [[ ${name#"$1-n"} =~ ^[0-9]+$ ]] && echo "$name" ;;
        esac
    done
}

# _cluster_end_group PGID: ends a process group, TERM first, KILL after 2 s
_cluster_end_group() {
    kill -TERM -- "-$1" 2> /dev/null || return 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$1" 2> /dev/null || return 0; sleep 0.2; done
    kill -KILL -- "-$1" 2> /dev/null
}

# cluster_down [PREFIX]: ends the command run on the cluster and every process inside the cluster's
# namespaces (mpirun, its daemons, the ranks, sshd, Slurm's daemons and jobs), deletes the namespaces
# (their veths and the bridge go with them) and the state. Without PREFIX, the cluster this process
# made, if any: never one that cluster_up refused to touch.
cluster_down() {
    local prefix=${1:-${CLUSTER_ACTIVE_PREFIX:-}} ns pids
    [ -n "$prefix" ] || return 0
    _cluster_prefix_ok "$prefix" || return 1
    local state="$CLUSTER_STATE_ROOT/$prefix"
    rm -f "$state/up"   # tells the watchdog that the owner cleans up
    if [ -f "$state/command" ]; then
        local g; g=$(cat "$state/command")
        [[ $g =~ ^[0-9]+$ ]] && [ "$g" != "$$" ] && _cluster_end_group "$g"
    fi
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
        [[ $w =~ ^[0-9]+$ ]] && [ "$w" != "$$" ] && kill "$w" 2>/dev/null
    fi
    # the prefix was checked: this is a folder of CLUSTER_STATE_ROOT, never a path outside it
    [ -n "${CLUSTER_KEEP_STATE:-}" ] || { [ -d "$state" ] && [ ! -L "$state" ] && rm -rf "$state"; }
    [ "${CLUSTER_ACTIVE_PREFIX:-}" = "$prefix" ] && unset CLUSTER_ACTIVE_PREFIX
    return 0
}

# cluster_link_bytes [PREFIX]: bytes the nodes have sent into the switch (each node port's rx counter)
cluster_link_bytes() {
    local prefix=${1:-${CLUSTER_ACTIVE_PREFIX:-$CLUSTER_PREFIX}}
    _cluster_prefix_ok "$prefix" || return 1
    ip netns exec "$prefix-hub" sh -c 'cat /sys/class/net/port*/statistics/rx_bytes' | awk '{s += $1} END {printf "%.0f\n", s}'
}

# rate in bits per second from tc's notation (1gbit, 100mbit, 1.5mbit, 500kbit, 1000000bit); 0 if it is not one
_cluster_rate_bits() {
    echo "$1" | awk '{ r = tolower($0)
        if (r !~ /^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$/) { print 0; exit }
        n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
        m = (u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : 1e9)
        printf "%.0f\n", n * m }'
}

# _cluster_check_args NODES SLOTS RATE: the shape and the rate, before anything is made
_cluster_check_args() {
    case "$1" in [2-8]) ;; *) _cluster_say "error: --nodes $1: between 2 and 8"; return 1 ;; esac
    case "$2" in [1-9]|[1-9][0-9]) ;; *) _cluster_say "error: --slots $2: a positive count"; return 1 ;; esac
    [ "$3" = none ] || [ "$(_cluster_rate_bits "$3")" -gt 0 ] ||
        { _cluster_say "error: --rate $3: a tc rate such as 1gbit, 100mbit, 1.5mbit, 500kbit, or none"; return 1; }
}

# _cluster_node NS ADDRESS HUB_PORT: a namespace with one interface, eth0, on the switch
_cluster_node() {
    local ns=$1 addr=$2 port=$3
    _cluster_run ip netns add "$ns" &&
    _cluster_run ip link add name eth0 netns "$ns" type veth peer name "$port" netns "$CLUSTER_ACTIVE_PREFIX-hub" &&
    _cluster_run ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 &&
    _cluster_run ip -n "$ns" addr add "$addr/24" dev eth0 &&
    _cluster_run ip -n "$ns" link set lo up && _cluster_run ip -n "$ns" link set eth0 up &&
    _cluster_run ip -n "$CLUSTER_ACTIVE_PREFIX-hub" link set "$port" master br0 up
}
_cluster_run() { "$@" || { _cluster_say "error: failed: $*"; return 1; }; }

# cluster_up NODES SLOTS RATE [slurm]: builds the cluster, starts its daemons and writes its files;
# 0 when up, 77 when this machine does not permit network namespaces, 1 on any other failure
# (nothing left behind).
cluster_up() {
    local nodes=$1 slots=$2 rate=$3 slurm=${4:-} prefix=$CLUSTER_PREFIX i ns
    local state="$CLUSTER_STATE_ROOT/$prefix"
    _cluster_prefix_ok "$prefix" && _cluster_check_args "$nodes" "$slots" "$rate" || return 1
    case "$slurm" in ""|slurm) ;; *) _cluster_say "error: cluster_up: '$slurm': expected slurm or nothing"; return 1 ;; esac
    local bits=0
    [ "$rate" != none ] && bits=$(_cluster_rate_bits "$rate")
    local tool
    for tool in ip tc unshare setsid mpirun; do
        command -v "$tool" > /dev/null || { _cluster_say "skip: $tool is not installed"; return 77; }
    done
    if [ -n "$slurm" ]; then _cluster_slurm_tools || return 77; fi
    # a namespace of this name already exists: ours, from a dead owner, is removed; anything else is refused
    if [ -n "$(_cluster_existing "$prefix")" ]; then
        local owner=""; [ -f "$state/owner" ] && owner=$(cat "$state/owner")
        if [[ $owner =~ ^[0-9]+$ ]] && ! _cluster_alive "$owner"; then
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
    # what the nodes need beyond the namespace: their own host names, and the rate limit (probed at
    # a rate tc surely takes, so that a rate it refuses later is an error, not a skip)
    if ! err=$(ip netns exec "$prefix-hub" unshare --uts true 2>&1); then
        ip netns del "$prefix-hub"
        _cluster_say "skip: unshare --uts is not permitted here (${err%%$'\n'*}); the nodes need their own host names"
        return 77
    fi
    if [ "$bits" -gt 0 ] && ! err=$(ip -n "$prefix-hub" link add probe0 type veth peer name probe1 2>&1 &&
                                    tc -n "$prefix-hub" qdisc add dev probe0 root tbf rate 1mbit burst 32768 latency 400ms 2>&1); then
        ip netns del "$prefix-hub"
        _cluster_say "skip: tc's token bucket filter is not available here (${err%%$'\n'*}; the kernel's sch_tbf); --rate none runs unshaped"
        return 77
    fi
    ip -n "$prefix-hub" link del probe0 2> /dev/null
    rm -rf "$state" && mkdir -p "$state" && chmod 755 "$state" && echo "$$" > "$state/owner" && touch "$state/up"
    # the watchdog: ends the command and removes the cluster when its owner dies without doing so
    # shellcheck disable=SC2016  # expanded by the watchdog's shell
    setsid bash -c "$(declare -f _cluster_alive)"'
                    while _cluster_alive "$1" && [ -e "$2/up" ]; do sleep 0.5; done
                    [ -e "$2/up" ] && CLUSTER_PREFIX=$3 bash "$4" down --prefix "$3"' \
        cluster-watchdog "$$" "$state" "$prefix" "$_cluster_self" > /dev/null 2>&1 < /dev/null &
    echo $! > "$state/watchdog"

    local burst=$((bits / 8 / 250))
    [ "$burst" -lt 32768 ] && burst=32768   # at least 4 ms of the rate, and more than one 64 KB GSO packet's worth
    _cluster_run ip -n "$prefix-hub" link add br0 type bridge || { cluster_down "$prefix"; return 1; }
    _cluster_run ip -n "$prefix-hub" link set br0 up || { cluster_down "$prefix"; return 1; }
    for ((i = 0; i < nodes; i++)); do
        ns=$prefix-n$i
        _cluster_node "$ns" "$CLUSTER_SUBNET.$((i + 1))" "port$i" || { cluster_down "$prefix"; return 1; }
        if [ "$bits" -gt 0 ]; then
            { _cluster_run tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 400ms &&
              _cluster_run tc -n "$prefix-hub" qdisc add dev "port$i" root tbf rate "$rate" burst "$burst" latency 400ms; } ||
                { cluster_down "$prefix"; return 1; }
        fi
    done
    # the head's port is not named port*: its control traffic is not counted as the link's
    if [ -n "$slurm" ]; then _cluster_node "$prefix-head" "$CLUSTER_SUBNET.254" head || { cluster_down "$prefix"; return 1; }; fi
    ip netns exec "$prefix-hub" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 2>/dev/null

    : > "$state/hostfile"
    for ((i = 0; i < nodes; i++)); do echo "$prefix-n$i slots=$slots" >> "$state/hostfile"; done
    local agent_env
    if _cluster_sshd_up "$state" "$prefix" "$nodes"; then
        agent_env="OMPI_MCA_plm_rsh_agent=ssh OMPI_MCA_plm_rsh_args='-F $state/ssh/config'"
        CLUSTER_LAUNCH=ssh
    else
        [ $? -eq 1 ] && { cluster_down "$prefix"; return 1; }
        _cluster_standin_ssh "$state/ssh-stand-in"
        agent_env="OMPI_MCA_plm_rsh_agent=$state/ssh-stand-in"
        CLUSTER_LAUNCH=stand-in
    fi
    # node0: a command as if typed on node 0, where mpirun --hostfile reaches the nodes as
    # ~/.ssh/config would have it (Open MPI reads its parameters from OMPI_MCA_* variables)
    cat > "$state/node0" <<SH
#!/bin/sh
# runs a command on node 0 of the simulated cluster '$prefix', with its host name
export $agent_env
exec ip netns exec $prefix-n0 unshare --uts sh -c 'hostname "\$0" && exec "\$@"' $prefix-n0 "\$@"
SH
    # rtc_hwloc_vmhole none: see tests/test_launch.sh (orted's hwloc shared-memory topology)
    cat > "$state/mpirun" <<SH
#!/bin/sh
# mpirun on node 0 of the simulated cluster '$prefix'; add -np and the program
exec $state/node0 mpirun --allow-run-as-root --oversubscribe --hostfile $state/hostfile --map-by ppr:$slots:node \\
    --bind-to none --mca btl self,vader,tcp --mca btl_tcp_if_include $CLUSTER_SUBNET.0/24 \\
    --mca oob_tcp_if_include $CLUSTER_SUBNET.0/24 --mca rtc_hwloc_vmhole none "\$@"
SH
    chmod +x "$state/node0" "$state/mpirun"
    if [ -n "$slurm" ]; then
        _cluster_slurm_up "$state" "$prefix" "$nodes" "$slots" || { cluster_down "$prefix"; return 1; }
        export CLUSTER_SLURM_BIN=$state/bin
    fi
    export CLUSTER_MPIRUN=$state/mpirun CLUSTER_HOSTFILE=$state/hostfile CLUSTER_NODES=$nodes CLUSTER_SLOTS=$slots
    export CLUSTER_RATE=$rate CLUSTER_LINK_BYTES="bash $_cluster_self link-bytes --prefix $prefix"
    export CLUSTER_STATE=$state CLUSTER_LAUNCH CLUSTER_NODE0=$state/node0
    CLUSTER_DESC="$nodes nodes x $slots ranks (namespaces $prefix-n0..$((nodes - 1)), mpirun through $CLUSTER_LAUNCH$([ -n "$slurm" ] && echo "; Slurm: slurmctld on $prefix-head, slurmd on every node")), link between nodes: $([ "$bits" -gt 0 ] && echo "$rate per node each way (tc tbf, burst $burst bytes)" || echo "unshaped veth")"
    export CLUSTER_DESC
    return 0
}

# ----------------------------------------------------------------------------
# the command line (not when sourced)
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
    mode=run nodes=2 slots=2 rate=1gbit slurm=""
    case "${1:-}" in down|link-bytes) mode=$1; shift ;; -h|--help) usage ;; esac
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes|--slots|--rate|--prefix)
                [ $# -ge 2 ] || { _cluster_say "error: $1 needs a value"; exit 1; } ;;&
            --nodes) nodes=$2; shift 2 ;;
            --slots) slots=$2; shift 2 ;;
            --rate) rate=$2; shift 2 ;;
            --prefix) CLUSTER_PREFIX=$2; shift 2 ;;
            --slurm) slurm=slurm; shift ;;
            --) shift; break ;;
            *) _cluster_say "error: unknown argument '$1' (see --help)"; exit 1 ;;
        esac
    done
    _cluster_prefix_ok "$CLUSTER_PREFIX" || exit 1
    case "$mode" in
        down) cluster_down "$CLUSTER_PREFIX"; exit $? ;;
        link-bytes) cluster_link_bytes "$CLUSTER_PREFIX"; exit $? ;;
    esac
    _cluster_check_args "$nodes" "$slots" "$rate" || exit 1
    [ $# -gt 0 ] || { _cluster_say "error: no command after -- (see --help)"; exit 1; }
    trap 'cluster_down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM HUP
    cluster_up "$nodes" "$slots" "$rate" $slurm || exit $?
    _cluster_say "up: $CLUSTER_DESC"
    # the command in a process group of its own, which cluster_down ends (the watchdog's included, when
    # this script is killed outright); setpriv's parent-death signal ends it at once in that case
    pdeath=(); setpriv --pdeathsig TERM true 2> /dev/null && pdeath=(setpriv --pdeathsig TERM --)
    setsid "${pdeath[@]}" "$@" &
    echo $! > "$CLUSTER_STATE/command"
    # in the background, so that a signal ends the wait (the command and the cluster) at once
    wait $!
fi
