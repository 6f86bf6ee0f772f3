# The configuration without a model: tests/config_test.c (config.h, ds_config.h, loss_scaler.h),
# run by tests/test_config.sh.
$(BUILD)/config_test: tests/config_test.c config.h ds_config.h loss_scaler.h common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# README.md's table of DeepSpeed keys, regenerated from ds_config.h (tests/test_config.sh checks they agree)
.PHONY: readme-config-keys
readme-config-keys: $(BUILD)/config_test
	@$(BUILD)/config_test lr --config-keys > $(BUILD)/config_keys.md
	@awk -v f=$(BUILD)/config_keys.md '/<!-- config-keys -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next } \
	     /<!-- \/config-keys -->/ { skip = 0 } !skip' README.md > README.md.tmp && mv README.md.tmp README.md
