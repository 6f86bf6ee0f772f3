# Data pipeline (docs/data.md). Needs no MPI: plain $(CC).
#   make prepare_data   the data tool
#   make data           tokenizer file + Brown corpus train/val shards (scripts/prepare_data.sh)
prepare_data: prepare_data.c tokenizer.h dataloader.h common.h
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

data: prepare_data
	@bash scripts/prepare_data.sh
