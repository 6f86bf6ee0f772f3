# scripts/gpu_env.sh: SOURCE this on the lent GPU machine (bash) to get our Debian build
# dependencies from .gpu_deps/ (fetched here by scripts/gpu_deps.sh, carried by the session):
#   source scripts/gpu_env.sh [PREFIX]      (default /tmp/zeroc_deps)
# It unpacks every .gpu_deps/*.deb with `dpkg -x` into PREFIX (once; it is skipped when
# PREFIX/.unpacked lists the same files) and sets PATH, LD_LIBRARY_PATH, CPATH, LIBRARY_PATH and
# OPAL_PREFIX (Open MPI finds its components, help files and wrapper data relative to it), so
# that mpicc, mpirun, cJSON, PCRE2, OpenBLAS and liburing work as on the build machine. It also exports
# GPU_MAKE_FLAGS (OPENBLAS_DIR=...) to pass to make, since the Makefile names OpenBLAS's
# Debian directory. Nothing outside PREFIX is written. Returns 1 with one line on a problem.
# Where the system already has a working mpicc and cJSON (a machine with our Debian packages),
# pass ZEROC_SYSTEM_DEPS=1 to change nothing.
# PyTorch must not load these libraries, nor the CUDA toolkit's that scripts/gpu_check.sh puts first:
# `zeroc_torch CMD...` (exported) runs CMD with the library and include paths as they were before the
# first source of this file.
zeroc_torch() {
    if [ "${ZEROC_BASE_SAVED:-0}" != 1 ]; then "$@"; return; fi
    local e=(env -u LD_LIBRARY_PATH -u CPATH -u LIBRARY_PATH) v
    for v in LD_LIBRARY_PATH CPATH LIBRARY_PATH; do
        local set="ZEROC_BASE_${v}_SET" val="ZEROC_BASE_$v"
        [ "${!set}" = 1 ] && e+=("$v=${!val}")
    done
    "${e[@]}" "$@"
}
export -f zeroc_torch
if [ "${ZEROC_BASE_SAVED:-0}" != 1 ]; then
    for _v in LD_LIBRARY_PATH CPATH LIBRARY_PATH; do
        export "ZEROC_BASE_${_v}_SET=${!_v+1}" "ZEROC_BASE_$_v=${!_v-}"
    done
    export ZEROC_BASE_SAVED=1
    unset _v
fi
zeroc_gpu_env() {
    local root prefix
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    prefix="${1:-${ZEROC_DEPS_PREFIX:-/tmp/zeroc_deps}}"
    if [ "${ZEROC_SYSTEM_DEPS:-0}" = 1 ]; then echo "gpu_env: using the system's libraries"; return 0; fi
    local debs=("$root"/.gpu_deps/*.deb)
    if [ ! -e "${debs[0]}" ]; then
        echo "gpu_env: error: no .gpu_deps/*.deb (run scripts/gpu_deps.sh on the build machine and carry .gpu_deps)" >&2
        return 1
    fi
    command -v dpkg >/dev/null 2>&1 || { echo "gpu_env: error: dpkg not found (needed to unpack .gpu_deps)" >&2; return 1; }
    local list
    list="$(cd "$root/.gpu_deps" && ls *.deb)"
    if [ ! -f "$prefix/.unpacked" ] || [ "$(cat "$prefix/.unpacked")" != "$list" ]; then
        rm -rf "$prefix" && mkdir -p "$prefix" || return 1
        local d
        for d in "${debs[@]}"; do dpkg -x "$d" "$prefix" || { echo "gpu_env: error: dpkg -x $d failed" >&2; return 1; }; done
        echo "$list" > "$prefix/.unpacked"
    fi
    # glibc: the carried libraries were built against Debian 12's (2.36; libevent-core imports
    # arc4random@GLIBC_2.36); an image with an older one would fail every build and run obscurely
    local need have
    need=$(find "$prefix" -name '*.so*' -type f -print0 | xargs -0 grep -aoh 'GLIBC_2\.[0-9]*' 2>/dev/null |
           sort -t. -k2,2n -u | tail -n 1)
    have=${ZEROC_GLIBC_HAVE:-$(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9]*\.[0-9]*$')}   # (tests pretend another)
    if [ -n "$need" ] && [ -n "$have" ] && [ "${have#2.}" -lt "${need#GLIBC_2.}" ] 2>/dev/null; then
        echo "gpu_env: error: the libraries in .gpu_deps need $need, this machine has glibc $have: build .gpu_deps on a system with glibc $have or older (scripts/gpu_deps.sh)" >&2
        return 1
    fi
    local usr="$prefix/usr" multi="$prefix/usr/lib/x86_64-linux-gnu"
    # Debian names mpicc/mpirun through /etc/alternatives, which dpkg -x does not create
    mkdir -p "$prefix/bin"
    ln -sf "$usr/bin/mpicc.openmpi" "$prefix/bin/mpicc"
    ln -sf "$usr/bin/mpicxx.openmpi" "$prefix/bin/mpicxx"
    ln -sf "$usr/bin/mpirun.openmpi" "$prefix/bin/mpirun"
    ln -sf "$usr/bin/mpiexec.openmpi" "$prefix/bin/mpiexec"
    # PMIx (used by Open MPI) has its own absolute install paths: its plugins and help files
    export OPAL_PREFIX="$usr" PMIX_PREFIX="$multi/pmix2" PMIX_MCA_mca_base_component_path="$multi/pmix2/lib/pmix"
    export PATH="$prefix/bin:$usr/bin:$PATH"
    local libs="$multi/openmpi/lib:$multi:$multi/openblas-openmp:$prefix/lib/x86_64-linux-gnu"
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$libs${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export CPATH="$usr/include:$usr/include/x86_64-linux-gnu/openblas-openmp:$multi/openmpi/include${CPATH:+:$CPATH}"
    # a singleton run (./train_gpt without mpirun) needs no orted; shared memory between local ranks
    export OMPI_MCA_ess_singleton_isolated=1
    export OMPI_MCA_btl="self,vader" OMPI_MCA_pml=ob1 OMPI_MCA_btl_base_warn_component_unused=0
    # vader's single-copy path (CMA, process_vm_readv) fails in sandboxes without ptrace rights
    # ("Read -1, expected ..., errno = 1"); plain copy-in/copy-out works everywhere
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export GPU_MAKE_FLAGS="OPENBLAS_DIR=$multi/openblas-openmp" ZEROC_GPU_ENV=1   # scripts/setup.sh: nothing to install
    command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
    if ! mpicc --showme:version >/dev/null 2>&1; then echo "gpu_env: error: the unpacked mpicc does not run" >&2; return 1; fi
    echo "gpu_env: $(echo "$list" | wc -l) packages from .gpu_deps in $prefix (they need ${need:-?}; glibc here ${have:-?}); $(mpicc --showme:version 2>&1 | head -1)"
}
zeroc_gpu_env "$@"
