#!/usr/bin/env bash
# Builds every CUDA kernel dev program (dev/cuda/*.cu, including all cuda/*.cuh headers they
# include): `make cuda-dev-check`, the optimizers off, into build/check/dev_cuda/ (mk/gpu.mk says why).
# Needs only the CUDA toolkit, no GPU. A compile error fails the test.
# run.sh: last (tests/run.sh starts this build in the background, at nice 19, before the first test)
cd "$(dirname "$0")/.."
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$NVCC" ] && ! command -v "$NVCC" >/dev/null 2>&1; then
    echo "SKIP: no nvcc ($NVCC)"
    exit 77
fi
mkdir -p build/check   # the lock: tests/run.sh may be building these in the background
flock build/check.lock make -j2 cuda-dev-check || { echo "FAIL: make cuda-dev-check"; exit 1; }
n=0
for src in dev/cuda/*.cu; do
    bin=build/check/dev_cuda/$(basename "$src" .cu)
    [ -x "$bin" ] || { echo "FAIL: $bin was not built"; exit 1; }
    n=$((n + 1))
done
echo "built $n dev/cuda programs"
