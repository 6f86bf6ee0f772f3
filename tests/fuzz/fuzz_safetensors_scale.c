// Fuzz target: safetensors headers at scale (formats/safetensors.h, formats/json.h). From a few input
// bytes it builds a header of up to 102,400 empty tensors and names some of them alike at places the
// input picks. The header must be accepted exactly when the names are distinct, and each must parse
// within the fuzzer's timeout: the duplicate check is a sort (n log n), not a comparison of every pair
// (which took about 70 s at 100k tensors). tests/test_strict_input.sh checks the cap, ST_MAX_TENSORS.
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int n = 400 * (1 + data[0]);   // 400 to 102,400
    int *id = (int *)xmalloc(sizeof(int) * n, "names");   // tensor i is named "t<id[i]>"
    for (int i = 0; i < n; i++) id[i] = i;
    int dup = 0;
    for (size_t b = 1; b + 1 < size && b < 17; b += 2) {   // up to 8 renamings: tensor a takes tensor c's name
        int a = (int)((data[b] * 7919u) % (unsigned)n), c = (int)((data[b + 1] * 104729u) % (unsigned)n);
        id[a] = id[c];
    }
    char *seen = (char *)xcalloc(n, "seen");
    for (int i = 0; i < n; i++) { if (seen[id[i]]) dup = 1; seen[id[i]] = 1; }
    size_t cap = (size_t)n * 64 + 64, len = 0;
    char *h = (char *)xmalloc(cap, "header");
    len += snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) len += snprintf(h + len, cap - len, ",\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", id[i]);
    len += snprintf(h + len, cap - len, "}");
    STFile s;
    memset(&s, 0, sizeof(s));
    char err[2048];
    int ok = st_parse_header(&s, "fuzz.safetensors", h, len, 8 + len, err, sizeof(err));
    if (ok != !dup) { fprintf(stderr, "n %d, duplicates %d: %s\n", n, dup, ok ? "accepted" : err); abort(); }
    if (ok) {
        for (int i = 0; i < n; i += 997) {   // every name is found by name
            char name[32];
            snprintf(name, sizeof(name), "t%d", id[i]);
            const STTensor *t = st_find(&s, name);
            if (!t || strcmp(t->name, name) != 0) abort();
        }
        st_close(&s);
    }
    free(h); free(seen); free(id);
    return 0;
}
