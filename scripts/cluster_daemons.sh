# shellcheck shell=bash
# scripts/cluster_daemons.sh: the daemons of scripts/cluster.sh's nodes, sourced by it. OpenSSH's sshd
# on every node, reached with a key made for the cluster; with Slurm, munged and slurmctld on the head
# node and slurmd on every node, under a slurm.conf written for the cluster. Each daemon runs in its
# node's network namespace with the node's host name (a UTS namespace), detached from the caller, with
# a clean environment and its output in the cluster's state folder. cluster_down ends them with
# everything else inside the namespaces. See docs/cluster.md.

# _cluster_daemon NS LOG CMD...: CMD as a daemon on node NS, whose host name is NS
_cluster_daemon() {
    local ns=$1 log=$2; shift 2
    # shellcheck disable=SC2016  # expanded by the node's shell
    setsid -f env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@" > "$log" 2>&1 < /dev/null
}

# _cluster_until SECONDS WHAT LOG CMD...: polls CMD every 0.2 s until it succeeds; an error naming
# WHAT and its log when SECONDS pass first
_cluster_until() {
    local secs=$1 what=$2 log=$3 i; shift 3
    for ((i = 0; i < secs * 5; i++)); do "$@" > /dev/null 2>&1 && return 0; sleep 0.2; done
    _cluster_say "error: $what not up after $secs s; its log, $log, ends: $(tail -n 3 "$log" 2> /dev/null | tr '\n' ' ')"
    return 1
}

# _cluster_sshd_up STATE PREFIX NODES: sshd on every node, the client's config, keys and known hosts
# in STATE/ssh; a check that node 0 reaches every node by name. 0: up; 2: sshd cannot run here (said
# in one line); 1: it failed.
_cluster_sshd_up() {
    local state=$1 prefix=$2 nodes=$3 dir=$1/ssh i
    if [ ! -x /usr/sbin/sshd ] || ! command -v ssh > /dev/null || ! command -v ssh-keygen > /dev/null; then
        _cluster_say "note: no sshd, ssh or ssh-keygen (Debian's openssh-server, openssh-client): mpirun reaches the nodes through a stand-in for ssh"
        return 2
    fi
    mkdir -m 700 "$dir" || return 1
    # sshd's privilege separation folder, which a service manager makes at boot
    [ -d /run/sshd ] || mkdir -m 755 /run/sshd || return 1
    ssh-keygen -q -t ed25519 -N '' -C "zeroc cluster $prefix: host" -f "$dir/host_key" &&
        ssh-keygen -q -t ed25519 -N '' -C "zeroc cluster $prefix: mpirun" -f "$dir/id_ed25519" || return 1
    cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
    cat > "$dir/sshd_config" <<EOF
# sshd of the nodes of the cluster '$prefix' (scripts/cluster.sh): root with the cluster's key only
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PrintMotd no
PidFile none
LogLevel INFO
EOF
    : > "$dir/known_hosts"; : > "$dir/config"
    for ((i = 0; i < nodes; i++)); do
        printf 'Host %s\n    HostName %s\n' "$prefix-n$i" "$CLUSTER_SUBNET.$((i + 1))" >> "$dir/config"
        echo "$prefix-n$i,$CLUSTER_SUBNET.$((i + 1)) $(cut -d' ' -f1,2 "$dir/host_key.pub")" >> "$dir/known_hosts"
    done
    cat >> "$dir/config" <<EOF
Host *
    User root
    IdentityFile $dir/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    LogLevel ERROR
EOF
    for ((i = 0; i < nodes; i++)); do
        _cluster_daemon "$prefix-n$i" "$dir/sshd.n$i.log" /usr/sbin/sshd -D -e -f "$dir/sshd_config" \
            -o "ListenAddress=$CLUSTER_SUBNET.$((i + 1))" || return 1
    done
    # node 0 reaches every node by name, and lands on that node
    for ((i = 0; i < nodes; i++)); do
        _cluster_until 20 "sshd on $prefix-n$i" "$dir/sshd.n$i.log" \
            _cluster_ssh_lands "$prefix-n0" "$dir/config" "$prefix-n$i" || return 1
    done
}
_cluster_ssh_lands() { [ "$(ip netns exec "$1" ssh -F "$2" "$3" hostname)" = "$3" ]; }

# _cluster_standin_ssh FILE: stands in for ssh where sshd cannot run
_cluster_standin_ssh() {
    cat > "$1" <<'SH'
#!/bin/sh
# stands in for ssh: drops the options, enters the node's namespace with its own host name and
# runs the command there, as sshd's shell would
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
SH
    chmod +x "$1"
}

_CLUSTER_SLURM_CMDS="sbatch srun salloc squeue sinfo scontrol scancel sacct"

# whether Slurm and munge are installed (else a one-line skip)
_cluster_slurm_tools() {
    local t
    for t in munged munge unmunge slurmctld slurmd $_CLUSTER_SLURM_CMDS; do
        command -v "$t" > /dev/null || PATH=$PATH:/usr/sbin command -v "$t" > /dev/null ||
            { _cluster_say "skip: $t is not installed (Debian's munge, slurmctld, slurmd, slurm-client)"; return 1; }
    done
}

# _cluster_slurm_up STATE PREFIX NODES SLOTS: munged (one key, one socket that every node's daemons
# reach through the shared file system), slurmctld on PREFIX-head, slurmd on every node; the
# commands in STATE/bin; returns when sinfo shows every node idle.
_cluster_slurm_up() {
    local state=$1 prefix=$2 nodes=$3 slots=$4 m=$1/munge s=$1/slurm i
    mkdir -m 755 "$m" "$s" "$s/spool" "$s/tmp" "$state/bin" && mkdir -m 700 "$m/key" "$s/ctld" || return 1
    if command -v mungekey > /dev/null; then mungekey --create --keyfile="$m/key/munge.key" || return 1
    else (umask 077 && head -c 1024 /dev/urandom > "$m/key/munge.key") || return 1; fi
    _cluster_daemon "$prefix-head" "$m/munged.out" munged --foreground --socket="$m/munge.socket" \
        --key-file="$m/key/munge.key" --pid-file="$m/munged.pid" --seed-file="$m/key/munged.seed" || return 1
    _cluster_until 20 munged "$m/munged.out" sh -c "munge --socket='$m/munge.socket' -n | unmunge --socket='$m/munge.socket'" || return 1

    # The CPUs of a node are the machine's (every node shares them), at least SLOTS; config_overrides
    # makes slurmd take the file's word. Processes are tracked by their parents (no cgroups to leave
    # behind); task/affinity honours srun's --cpu-bind. MpiDefault stays Slurm's default, none, as on
    # many sites: zeroc.sbatch asks srun for PMIx itself. TmpFS per node: slurmstepd's PMIx server
    # makes its clients' folder there, under a name that would clash between nodes in one /tmp.
    local cpus; cpus=$(nproc); [ "$cpus" -lt "$slots" ] && cpus=$slots
    cat > "$s/slurm.conf" <<EOF
# slurm.conf of the cluster '$prefix' (scripts/cluster.sh): written when it came up
ClusterName=zeroc
SlurmctldHost=$prefix-head($CLUSTER_SUBNET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/munge.socket
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$s/ctld
SlurmdSpoolDir=$s/spool/%n
TmpFS=$s/tmp/%n
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.%n.pid
SlurmctldLogFile=$s/slurmctld.log
SlurmdLogFile=$s/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=30
MinJobAge=3600
NodeName=DEFAULT CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 State=UNKNOWN
EOF
    # slurmd loads a cgroup plugin whatever the tracking: named, it does not look for the cgroup file
    # system, which a node's view of /sys (ip netns exec mounts its own) lacks
    echo "CgroupPlugin=cgroup/v1" > "$s/cgroup.conf"
    for ((i = 0; i < nodes; i++)); do
        echo "NodeName=$prefix-n$i NodeAddr=$CLUSTER_SUBNET.$((i + 1))" >> "$s/slurm.conf"
        mkdir -m 755 "$s/spool/$prefix-n$i" "$s/tmp/$prefix-n$i" || return 1
    done
    echo "PartitionName=nodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$s/slurm.conf"

    # the commands: run on the head node, where slurmctld is; each takes its folder off PATH first, so
    # that a job it submits finds Slurm's own srun on its node
    local c
    for c in $_CLUSTER_SLURM_CMDS; do
        cat > "$state/bin/$c" <<SH
#!/bin/sh
# Slurm's $c on the head node of the cluster '$prefix' (scripts/cluster.sh)
PATH=\$(echo ":\$PATH:" | sed 's|:$state/bin:|:|g; s|^:||; s|:\$||')
export SLURM_CONF=$s/slurm.conf
exec ip netns exec $prefix-head $c "\$@"
SH
        chmod +x "$state/bin/$c"
    done
    _cluster_daemon "$prefix-head" "$s/slurmctld.out" slurmctld -D -i -f "$s/slurm.conf" || return 1
    for ((i = 0; i < nodes; i++)); do
        _cluster_daemon "$prefix-n$i" "$s/slurmd.n$i.out" slurmd -D -f "$s/slurm.conf" || return 1
    done
    _cluster_until 60 "Slurm (every node idle in sinfo)" "$s/slurmctld.log" _cluster_all_idle "$state/bin/sinfo" "$nodes"
}
_cluster_all_idle() { [ "$("$1" -h -N -o %t | grep -c '^idle$')" -eq "$2" ]; }
