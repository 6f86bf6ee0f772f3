#!/usr/bin/env bash
# AdamW (adamw.cuh):
#   1. tests/adamw_test.c built as the trainers build it (-march=native): SIMD paths vs the scalar
#      reference, 10 steps vs torch.optim.AdamW, the tiled variant, bf16 rounding and NaN/Inf
#   2. the same test built for baseline x86-64 (run-time dispatch, libm fmaf in the scalar path),
#      without the torch part
#   3. the GPU kernel against the CPU reference and its benchmark (dev/cuda/adamw.cu) where a GPU
#      is present; without one that part prints why and is skipped
set -u
cd "$(dirname "$0")/.."
make -s build/adamw_test build/adamw_test_generic || exit 1
echo "== adamw_test (-march=native)"
./build/adamw_test || exit 1
echo "== adamw_test (-march=x86-64)"
ADAMW_TEST_NO_TORCH=1 ./build/adamw_test_generic || exit 1
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$NVCC" ]; then echo "GPU part skipped: no nvcc at $NVCC"; exit 0; fi
# without a GPU the program would only say so: its build is tests/test_cuda_build.sh's check
if ! nvidia-smi -L 2>/dev/null | grep -q GPU; then echo "GPU part skipped: no GPU (tests/test_cuda_build.sh compiles dev/cuda/adamw)"; exit 0; fi
echo "== dev/cuda/adamw (GPU kernel vs CPU reference)"
make -s dev/cuda/bin/adamw || exit 1
./dev/cuda/bin/adamw
rc=$?
if [ $rc -eq 77 ]; then echo "GPU part skipped (no usable CUDA device); CPU parts passed"; exit 0; fi
exit $rc
