// Fuzz target: the tokenizer file (tokenizer.h). A file that loads must then encode and decode:
// decode(encode(x)) == x for a fixed text with ASCII, UTF-8 and invalid bytes.
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Tokenizer t;
    char err[1024];
    if (!tokenizer_load(&t, "fuzz_tokenizer.bin", data, (long long)size, err, sizeof(err))) return 0;
    static const char text[] = "Hello world's 123 caf\xc3\xa9 \xff\xfe  done.\n";
    int *ids = NULL;
    size_t n = tokenizer_encode(&t, text, sizeof(text) - 1, &ids);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *b = tokenizer_decode(&t, ids[i], &len);
        if (at + len > sizeof(text) - 1 || memcmp(text + at, b, len) != 0) abort();
        at += len;
    }
    if (at != sizeof(text) - 1) abort();
    free(ids);
    tokenizer_free(&t);
    return 0;
}
