# Benchmarks (bench/, never timed tests; bench/record_all.sh re-records every CPU benchmark file).
#   make bench           bash bench/record_all.sh
#   make bench-bins      what the benchmarks run besides the trainers
.PHONY: bench bench-bins

# the sgemm peak and one training step's GEMMs through train_gpt.c's matmuls (bench/cpu_train.sh)
$(BUILD)/sgemm_bench: bench/sgemm.c train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $< -o $@ $(LDLIBS)

bench-bins: $(BUILD)/sgemm_bench $(BUILD)/cpu_adam $(BUILD)/z0/train_gpt_cpu $(BUILD)/z3/train_gpt_cpu

bench: bench-bins
	bash bench/record_all.sh
