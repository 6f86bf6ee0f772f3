// Fuzz target: the finiteness check of every model input (model/model.h's params_check_finite, which
// --init, --resume, --sample and the exporter run on each range of a model.bin they read). The input
// is a tiny model's fp32 parameters in flat order, as a model.bin holds them after its header (short
// inputs are padded with zeros). Each unit is read as a rank reads its range; the check must accept
// exactly the ranges with no Inf or NaN and name the tensor and element of the first one otherwise.
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ModelLayout L;
    static float *flat, *buf;
    if (!flat) {   // gpt2, 1 layer, C=8, 2 heads, vocabulary 16 (padded to 128), 4 positions
        ModelConfig c = {ARCH_GPT2, 1, 2, 2, 8, 32, 16, 128, 4, 1e-5f, 10000.0f};
        model_layout_build(&L, &c);
        flat = (float *)xmalloc(L.num_params * 4, "flat");
        buf = (float *)xmalloc(L.num_params * 4, "unit");
    }
    memset(flat, 0, L.num_params * 4);
    memcpy(flat, data, size < L.num_params * 4 ? size : L.num_params * 4);
    ParamSource src = params_from_flat(&L, flat);
    // a range of a unit, from the input's first bytes: [lo, lo + n)
    size_t pick = size >= 4 ? (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 : 0;
    for (int u = 0; u < L.n_units; u++) {
        size_t numel = L.units[u].numel, lo = pick % numel, n = numel - lo;
        if (!src.read(&src, u, lo, n, buf)) abort();
        char err[512];
        int ok = params_check_finite(&L, u, lo, buf, n, "fuzz.bin", err, sizeof(err));
        size_t bad = lo;   // the oracle: the first non-finite element of the range, and its tensor
        while (bad < lo + n && isfinite(flat[L.units[u].flat_offset + bad])) bad++;
        if (ok != (bad == lo + n)) abort();
        if (ok) continue;
        int k = 0;
        for (int j = 0; j < L.units[u].n_tensors; j++)
            if (L.units[u].t[j].offset <= bad && bad < L.units[u].t[j].offset + L.units[u].t[j].numel) k = j;
        char want[512];
        snprintf(want, sizeof(want), "fuzz.bin: tensor %s.%s: non-finite value at element %zu", L.units[u].name,
                 L.units[u].t[k].name, bad - L.units[u].t[k].offset);
        if (strcmp(err, want) != 0) { fprintf(stderr, "got '%s', want '%s'\n", err, want); abort(); }
    }
    return 0;
}
