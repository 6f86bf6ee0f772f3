// Fuzz target: a safetensors file's header (formats/safetensors.h), the input being the whole file:
// the 8-byte length, the JSON header and the tensor index checked against the file's size.
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    uint64_t hn = 0;
    for (int i = 0; i < 8; i++) hn |= (uint64_t)data[i] << (8 * i);
    char err[2048];
    if (!st_check_length("fuzz.safetensors", hn, size, err, sizeof(err))) return 0;
    char *text = (char *)xmalloc(hn + 1, "header");
    memcpy(text, data + 8, hn);
    text[hn] = 0;
    STFile s;
    memset(&s, 0, sizeof(s));
    if (st_parse_header(&s, "fuzz.safetensors", text, hn, size, err, sizeof(err))) {
        for (int i = 0; i < s.n; i++) if (st_find(&s, s.t[i].name) == NULL) abort();
        st_close(&s);
    }
    free(text);
    return 0;
}
