// Fuzz target: an optimizer shard's header (train/checkpoint_format.h) against what a resume expects:
// partition 1 of 2, 1000 elements per shard; the input is the whole file (its size counts).
#include "train/checkpoint_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t h[256] = {0};
    memcpy(h, data, size < sizeof(h) ? size : sizeof(h));
    char err[1024];
    optim_header_check(h, 2, 1, 1000, (long long)size, "optim_rank_00001.bin", err, sizeof(err));
    return 0;
}
