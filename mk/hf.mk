# Hugging Face interchange (formats/safetensors.h, model/hf.h, config/hf_config.h):
#   make export_model    ./export_model CKPT OUT_DIR [--dtype bf16]: a checkpoint to model.safetensors + config.json + the tokenizer files
#   (the import is --init OUT_DIR/model.safetensors in every trainer)
.PHONY: export_model
export_model: $(BUILD)/export_model
	@cp $< $@

$(BUILD)/export_model: tools/export_model.c tools/hf_tokenizer.h $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $< -o $@ $(LDLIBS)
