# AdamW (adamw.cuh): CPU test, CPU-Adam benchmark, standalone GPU kernel check.
#   make adamw_test      build/adamw_test (run by tests/test_adamw.sh)
#   make bench_cpu_adam  bench/cpu_adam.sh -> bench/cpu_adam.txt
#   make dev/cuda/bin/adamw
.PHONY: adamw_test bench_cpu_adam

$(BUILD)/adamw_test: tests/adamw_test.c adamw.cuh util/common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

$(BUILD)/cpu_adam: bench/cpu_adam.c adamw.cuh util/common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# the same test built for baseline x86-64 (no FMA/AVX at compile time): the run-time dispatch must
# still find the SIMD paths and the scalar fallback (libm fmaf) must give the same bits
$(BUILD)/adamw_test_generic: tests/adamw_test.c adamw.cuh util/common.h
	@mkdir -p $(@D)
	$(CC) $(subst $(CPU_ARCH_FLAGS),-march=x86-64,$(CFLAGS)) $< -o $@ $(LDLIBS)

adamw_test: $(BUILD)/adamw_test $(BUILD)/adamw_test_generic

bench_cpu_adam: $(BUILD)/cpu_adam
	bash bench/cpu_adam.sh

$(CUDA_DEV_BIN)/adamw: dev/cuda/adamw.cu adamw.cuh dev/cuda/gpt2_plan.cuh dev/cuda/kernel_check.cuh cuda/common.cuh $(wildcard config/*.h) model/model.h zero/plan.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $< -o $@ -lcjson -lgomp

cuda: dev/cuda/bin/adamw
