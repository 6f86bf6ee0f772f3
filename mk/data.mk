# Data pipeline (docs/data.md). Needs no MPI: plain $(CC).
#   make prepare_data   the data tool
#   make data           tokenizer file + Brown corpus train/val shards (scripts/prepare_data.sh)
prepare_data: tools/prepare_data.c tokenizer.h dataloader.h util/common.h
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

data: prepare_data
	@bash scripts/prepare_data.sh

# tests/dataloader_test.c: the batch order checked from the tokens (tests/test_shards.sh)
$(BUILD)/dataloader_test: tests/dataloader_test.c dataloader.h util/common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)
