# Sampling (train/sample.h): tests/test_decode.c checks the KV-cache decode step against the full forward
# (every position's logits) and the sampler's filters; one source for both trainers.
#   make test_decode_cpu ZERO=k     build/z<k>/test_decode_cpu (tests/test_sample.sh: stages 0 and 3)
#   build/gpu_test/test_decode, build/gpu_test_z3/test_decode   the GPU trainer's (part of make gpu-all)
.PHONY: test_decode_cpu
test_decode_cpu: $(BUILD)/z$(ZERO)/test_decode_cpu

$(BUILD)/z%/test_decode_cpu: tests/test_decode.c train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -DZERO_STAGE=$* $< -o $@ $(LDLIBS)

$(BUILD)/gpu_test/test_decode: tests/test_decode.c $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -x cu -DZERO_STAGE=0 -DOFFLOAD=0 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

$(BUILD)/gpu_test_z3/test_decode: tests/test_decode.c $(GPU_SRCS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -x cu -DZERO_STAGE=3 -DOFFLOAD=0 -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

gpu-all: $(BUILD)/gpu_test/test_decode $(BUILD)/gpu_test_z3/test_decode
