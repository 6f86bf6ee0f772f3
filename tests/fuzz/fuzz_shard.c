// Fuzz target: a token shard's header and tokens (dataloader.h), the input being the whole file.
#include "dataloader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int32_t header[SHARD_HEADER_INTS] = {0};
    memcpy(header, data, size < sizeof(header) ? size : sizeof(header));
    char err[1024];
    long long n = shard_parse_header("fuzz.bin", header, (long long)size, err, sizeof(err));
    if (n < 0) return 0;
    uint16_t *tokens = (uint16_t *)xmalloc(2 * (size_t)n, "tokens");   // the header promised exactly these bytes
    memcpy(tokens, data + sizeof(header), 2 * (size_t)n);
    shard_find_bad_token(tokens, n, 50257);
    free(tokens);
    return 0;
}
