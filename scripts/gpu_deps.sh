#!/usr/bin/env bash
# scripts/gpu_deps.sh: run HERE (the Debian 12 build machine, after scripts/setup.sh) before a
# session on the lent GPU machine. That machine has nvcc, the CUDA libraries and python3 with
# PyTorch, but no package registry and none of our Debian libraries (Open MPI, cJSON, PCRE2,
# OpenBLAS, liburing). This fetches their .deb files, with every shared library they need that a
# CUDA/Ubuntu image does not already have, into the git-ignored folder .gpu_deps/.
# scripts/gpu_env.sh (sourced by scripts/gpu_check.sh) unpacks them there with `dpkg -x`.
#
#   bash scripts/gpu_deps.sh        -> .gpu_deps/*.deb  (29 packages, about 21 MB; takes about a minute)
#
# The set is computed, not guessed: starting from the packages below, every ELF file they
# install (programs, libraries, Open MPI's plugins) is run through ldd, each
# library it loads is mapped back to its package (dpkg -S), and so on until nothing new
# appears. Packages every glibc/gcc system has in a newer version (BASE) are left out, so the
# unpacked folder never shadows the GPU machine's own libc, libstdc++, libgomp, ... hwloc's
# optional plugins (libhwloc-plugins: X11, OpenCL, NVML topology) are left out too: Open MPI
# runs without them.
# Versions are the ones installed here, so what runs there is what the tests use here.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.gpu_deps

SEED=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
      libcjson1 libcjson-dev libpcre2-8-0 libpcre2-dev
      libopenblas0-openmp libopenblas-openmp-dev libgfortran5
      liburing2 liburing-dev)   # io_uring: NVMe offload (zero/nvme_store.h)
BASE=" $(echo libc6 libc-bin libgcc-s1 libstdc++6 libgomp1 libatomic1 gcc-12-base zlib1g libzstd1 liblzma5 \
       libbz2-1.0 libssl3 libcrypt1 libudev1 libsystemd0 libcap2 libselinux1 libmd0 libbsd0 libgcrypt20 libgpg-error0 \
       liblz4-1 libxml2 libicu72 libtinfo6 libncursesw6 libuuid1) "

for p in "${SEED[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        { echo "gpu_deps: error: $p is not installed here; run scripts/setup.sh first (or apt-get install $p)" >&2; exit 1; }
done

# package owning a file path (usrmerge: a library may be listed under /lib or /usr/lib)
owner() {
    local f="$1" r
    for cand in "$f" "$(readlink -f "$f")" "${f#/usr}" "/usr$f"; do
        r=$(dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$r" ] && { echo "$r"; return; }
    done
}

declare -A have=() seen_lib=()
queue=("${SEED[@]}")
for p in "${SEED[@]}"; do have[$p]=1; done
while [ ${#queue[@]} -gt 0 ]; do
    p="${queue[0]}"; queue=("${queue[@]:1}")
    while IFS= read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        head -c 4 "$f" 2>/dev/null | grep -q "ELF" || continue
        while IFS= read -r lib; do
            [ -n "$lib" ] && [ -z "${seen_lib[$lib]:-}" ] || continue
            seen_lib[$lib]=1
            q=$(owner "$lib")
            [ -n "$q" ] || continue
            q=${q%%,*}
            if [ -z "${have[$q]:-}" ] && [[ "$BASE" != *" $q "* ]]; then
                have[$q]=1; queue+=("$q")
            fi
        done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
    done < <(dpkg -L "$p")
done

pkgs=$(printf '%s\n' "${!have[@]}" | sort)
mkdir -p "$DEST" .git/info
grep -qxF "/$DEST/" .git/info/exclude 2>/dev/null || echo "/$DEST/" >> .git/info/exclude
rm -f "$DEST"/*.deb
cd "$DEST"
for p in $pkgs; do
    v=$(dpkg-query -W -f='${Version}' "$p")
    # the installed version if the mirror still has it, else the current one
    apt-get download -q "$p=$v" >/dev/null 2>&1 || apt-get download -q "$p" >/dev/null 2>&1 ||
        { echo "gpu_deps: error: apt-get download $p failed (run apt-get update?)" >&2; exit 1; }
done
n=$(ls *.deb | wc -l)
echo "gpu_deps: $n packages in $DEST/ ($(du -sh . | cut -f1)): $(echo $pkgs | tr '\n' ' ')"
