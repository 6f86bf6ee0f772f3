# The configuration without a model: tests/config_test.c (config/flags.h, config/ds_config.h, train/loss_scaler.h),
# run by tests/test_config.sh.
$(BUILD)/config_test: tests/config_test.c $(wildcard config/*.h) train/loss_scaler.h util/common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# docs/config.md's table of DeepSpeed keys, regenerated from config/ds_config.h (tests/test_config.sh checks they agree)
CONFIG_KEYS_DOC := docs/config.md
.PHONY: docs-config-keys
docs-config-keys: $(BUILD)/config_test
	@$(BUILD)/config_test lr --config-keys > $(BUILD)/config_keys.md
	@awk -v f=$(BUILD)/config_keys.md '/<!-- config-keys -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next } \
	     /<!-- \/config-keys -->/ { skip = 0 } !skip' $(CONFIG_KEYS_DOC) > $(CONFIG_KEYS_DOC).tmp && mv $(CONFIG_KEYS_DOC).tmp $(CONFIG_KEYS_DOC)

# The same configuration code as the GPU trainer compiles it (nvcc: TRAINER_IS_GPU, and the fp16 build's
# FLOATX_FP16): the precision checks of train_gpt run here without a GPU (tests/test_fp16.sh)
$(BUILD)/config_test_gpu: tests/config_test.c $(wildcard config/*.h) train/loss_scaler.h util/common.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -x cu $< -o $@ -lcjson -lpcre2-8 -lgomp -lm

$(BUILD)/config_test_gpu_fp16: tests/config_test.c $(wildcard config/*.h) train/loss_scaler.h util/common.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DFLOATX_FP16=1 -x cu $< -o $@ -lcjson -lpcre2-8 -lgomp -lm
