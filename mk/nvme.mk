# ZeRO-Infinity's NVMe offload (zero/nvme_store.h, zero/infinity.h): its benchmark.
#   make bench_nvme      bench/nvme_offload.sh -> bench/nvme_offload.txt
#   build/nvme_io DIR MIB [BLOCK_SIZE QUEUE_DEPTH THREAD_COUNT]   a disk's sequential bandwidth through the same engine
# tests/test_nvme.sh tests it (make test).
.PHONY: bench_nvme

$(BUILD)/nvme_io: bench/nvme_io.c zero/nvme_store.h util/common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

bench_nvme: $(BUILD)/nvme_io
	bash bench/nvme_offload.sh
