# CUDA kernel dev programs (cuda/*.cuh checked and timed by dev/cuda/*.cu).
#   make cuda-dev              build every dev/cuda/*.cu to dev/cuda/bin/<name>
#   make dev/cuda/bin/<name>   build one
#   dev/cuda/bin/<name>        run one: checks against its CPU reference (exit 1 on failure),
#                              prints timings; exits 77 with "SKIP: ..." without a GPU
# A more specific rule in another mk/*.mk (e.g. dev/cuda/bin/adamw) takes precedence.
.PHONY: cuda-dev

CUDA_DEV_SRCS := $(wildcard dev/cuda/*.cu)
CUDA_DEV_BINS := $(patsubst dev/cuda/%.cu,$(CUDA_DEV_BIN)/%,$(CUDA_DEV_SRCS))
CUDA_KERNEL_HEADERS := $(wildcard cuda/*.cuh) $(wildcard dev/cuda/*.cuh) cuda/sizes.h util/quantize.h dev/cuda/host_check.h \
                       dev/cuda/attention_ref.h dev/cuda/quantize_cases.h

$(CUDA_DEV_BIN)/%: dev/cuda/%.cu $(CUDA_KERNEL_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $< -o $@ -lcublasLt -lcublas -lcjson -lgomp

cuda-dev: $(CUDA_DEV_BINS)

# The flash attention kernels (cuda/flash_attention.cuh) run on the CPU by an emulation of the
# instructions they use (dev/cuda/flash_emulate.h): plain g++, no GPU and no CUDA toolkit
# (tests/test_flash_emulate.sh). -U_FORTIFY_SOURCE: the emulation switches between thread stacks
# with longjmp, which the fortified longjmp refuses.
FLASH_EMULATE_DEPS := dev/cuda/flash_emulate.cpp dev/cuda/flash_emulate.h dev/cuda/emulate.h dev/cuda/host_check.h dev/cuda/attention_ref.h \
                      cuda/flash_attention.cuh cuda/sizes.h
FLASH_EMULATE_FLAGS := -O2 -std=c++17 -I. -Wall -Wno-unknown-pragmas -Wno-unused-function -fno-strict-aliasing \
                       -U_FORTIFY_SOURCE -fopenmp
dev/cuda/bin/flash_emulate: $(FLASH_EMULATE_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(FLASH_EMULATE_FLAGS) $< -o $@
# the same under AddressSanitizer (out-of-bounds global accesses of the kernels' own loads and stores)
dev/cuda/bin/flash_emulate_asan: $(FLASH_EMULATE_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(filter-out -O2,$(FLASH_EMULATE_FLAGS)) -O1 -fsanitize=address -fno-omit-frame-pointer $< -o $@

# The kernels no GPU has run yet that use shuffles, shared memory or atomics, run on the CPU with their
# launchers (tests/test_kernels_emulate.sh): the headers as dev/cuda/emulate_source.py rewrites them
# (build/emu/, the same lines), the CUDA runtime and cuBLASLt of dev/cuda/emu/ over dev/cuda/emulate.h.
# Under UndefinedBehaviorSanitizer, alignment included (a misaligned float store, which the GPU
# faults on, stops the program); the _asan build adds AddressSanitizer (out-of-bounds accesses of the
# kernels' own loads and stores; ten times slower with the fibers: tests run it on --quick).
EMU_HEADERS := $(patsubst %,$(BUILD)/emu/%,$(filter-out cuda/flash_attention.cuh,$(wildcard cuda/*.cuh)) adamw.cuh)
$(BUILD)/emu/%.cuh: %.cuh dev/cuda/emulate_source.py
	@mkdir -p $(@D)
	@$(PYTHON) dev/cuda/emulate_source.py $< $@
KERNELS_EMULATE_DEPS := dev/cuda/kernels_emulate.cpp dev/cuda/emulate.h dev/cuda/host_check.h dev/cuda/quantize_cases.h \
                        $(wildcard dev/cuda/emu/*.h) $(EMU_HEADERS) util/common.h util/quantize.h cuda/sizes.h
KERNELS_EMULATE_FLAGS := -O1 -std=c++17 -D__CUDACC__ -D__CUDA_ARCH__=900 -I$(BUILD)/emu -Idev/cuda/emu -I. -Wall \
                         -Wno-unknown-pragmas -Wno-unused-function -Wno-sign-compare -fno-strict-aliasing -U_FORTIFY_SOURCE \
                         -fsanitize=undefined,alignment -fno-sanitize-recover=all
dev/cuda/bin/kernels_emulate: $(KERNELS_EMULATE_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(KERNELS_EMULATE_FLAGS) $< -o $@
dev/cuda/bin/kernels_emulate_asan: $(KERNELS_EMULATE_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(KERNELS_EMULATE_FLAGS) -fsanitize=address -fno-omit-frame-pointer $< -o $@
