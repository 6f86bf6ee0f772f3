# The GPU trainer (train_gpt.cu) and its tests. Everything compiles and links without a GPU.
#   make gpu-all        train_gpt for ZERO=0,1,2,3 with OFFLOAD=0 and 1, stage 3 with released gather
#                       buffers poisoned (NaN), the fp16 build at stages 0 and 3, and test_gpt
#   make test_gpt       build/gpu_test/test_gpt (stage 0), copied to ./test_gpt
#   make train_gpt ZERO=k OFFLOAD=o [FP16=1]    (the rule is in the Makefile)
#   make gpu-check      each variant whose preprocessed code differs, compiled and linked with the
#                       optimizers off, into build/check/ (tests/test_gpu_build.sh); make
#                       cuda-dev-check: cuda-dev the same way (tests/test_cuda_build.sh)
# Each variant has its own build directory, build/gpu_z<k>_o<o>/train_gpt, and for the fp16
# build (floatX = __half: -DFLOATX_FP16=1) build/gpu_z<k>_o<o>_fp16/train_gpt.
.PHONY: gpu-all gpu-bins gpu-check gpu-check-bins cuda-dev-check

GPU_SRCS := train_gpt.cu $(HEADERS) $(wildcard cuda/*.cuh)

# The Makefile's rule covers build/gpu_z%_o$(OFFLOAD)/ only (OFFLOAD is fixed when it is read);
# these two give every variant in one make invocation, the offload flag taken from the path.
$(BUILD)/gpu_z%_o0/train_gpt: $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=$* -DOFFLOAD=0 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

$(BUILD)/gpu_z%_o1/train_gpt: $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=$* -DOFFLOAD=1 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

$(BUILD)/gpu_z%_o0_fp16/train_gpt: $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=$* -DOFFLOAD=0 -DFLOATX_FP16=1 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

$(BUILD)/gpu_z%_o1_fp16/train_gpt: $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=$* -DOFFLOAD=1 -DFLOATX_FP16=1 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

$(BUILD)/gpu_test/test_gpt: test_gpt.cu $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=0 -DOFFLOAD=0 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

test_gpt: $(BUILD)/gpu_test/test_gpt
	@cp $< $@

# stage 3 with every released gather buffer filled with NaN: a kernel that reads parameters after
# their release shows up as a NaN loss (tests/test_gpu.sh)
$(BUILD)/gpu_z3_poison/train_gpt: $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=3 -DOFFLOAD=0 -DZERO_POISON=1 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

GPU_BINS := $(foreach z,0 1 2 3,$(foreach o,0 1,$(BUILD)/gpu_z$(z)_o$(o)/train_gpt)) $(BUILD)/gpu_z3_poison/train_gpt \
            $(BUILD)/gpu_z0_o0_fp16/train_gpt $(BUILD)/gpu_z3_o0_fp16/train_gpt
gpu-bins: $(GPU_BINS)
gpu-all: $(GPU_BINS) $(BUILD)/gpu_test/test_gpt

# The suite's compile-and-link check of the CUDA targets, sized for CI's two cores:
#   - the variants whose preprocessed code differs: ZERO_STAGE and FLOATX_FP16 select code with #if,
#     while OFFLOAD (the default of --offload) and ZERO_POISON (an if on a constant) are values in
#     expressions, so the _o1 and poison builds compile what _o0 compiles (tests/test_gpu_build.sh
#     checks that no #if tests them);
#   - the host compiler and NVVM at -O0 (ptxas keeps its default, so its resource limits are still
#     checked): half the time of the -O3 build, with the same compile and link errors;
#   - into build/check/, so that no -O0 program is ever mistaken for the real one.
GPU_CHECK_FLAGS := BUILD=$(BUILD)/check CUDA_DEV_BIN=$(BUILD)/check/dev_cuda NVCC_OPT="-O0 -Xcicc -O0"
GPU_CHECK_BINS := $(foreach z,0 1 2 3,$(BUILD)/gpu_z$(z)_o0/train_gpt) $(BUILD)/gpu_z0_o0_fp16/train_gpt \
                  $(BUILD)/gpu_z3_o0_fp16/train_gpt $(BUILD)/gpu_test/test_gpt $(BUILD)/gpu_test/test_decode \
                  $(BUILD)/gpu_test_z3/test_decode
gpu-check:
	@$(MAKE) -s $(GPU_CHECK_FLAGS) gpu-check-bins
gpu-check-bins: $(GPU_CHECK_BINS)
cuda-dev-check:
	@$(MAKE) -s $(GPU_CHECK_FLAGS) cuda-dev
