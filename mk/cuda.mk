# CUDA kernel dev programs (cuda/*.cuh checked and timed by dev/cuda/*.cu).
#   make cuda-dev              build every dev/cuda/*.cu to dev/cuda/bin/<name>
#   make dev/cuda/bin/<name>   build one
#   dev/cuda/bin/<name>        run one: checks against its CPU reference (exit 1 on failure),
#                              prints timings; exits 77 with "SKIP: ..." without a GPU
# A more specific rule in another mk/*.mk (e.g. dev/cuda/bin/adamw) takes precedence.
.PHONY: cuda-dev

CUDA_DEV_SRCS := $(wildcard dev/cuda/*.cu)
CUDA_DEV_BINS := $(patsubst dev/cuda/%.cu,dev/cuda/bin/%,$(CUDA_DEV_SRCS))
CUDA_KERNEL_HEADERS := $(wildcard cuda/*.cuh) $(wildcard dev/cuda/*.cuh)

dev/cuda/bin/%: dev/cuda/%.cu $(CUDA_KERNEL_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $< -o $@ -lcublasLt -lcublas -lgomp

cuda-dev: $(CUDA_DEV_BINS)
