// Fuzz target: a checkpoint's manifest.json (train/checkpoint_format.h). A manifest that parses is written
// back with manifest_text and must parse again (the writer's output is always readable).
#include "train/checkpoint_format.h"
#include "config/ds_config.h"   // config_resolve_batch

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Manifest m;
    char err[2048];
    if (!manifest_parse((const char *)data, size, "manifest.json", &m, err, sizeof(err))) return 0;
    TrainConfig tc;
    train_config_defaults(&tc);
    model_apply_preset(&tc.model, ARCH_GPT2, "tiny");
    config_resolve_batch(&tc, 1);
    if (m.train_tokens < 0) m.train_tokens = 0;   // a format-1 manifest's: the writer always knows its data
    char *text = manifest_text(&m, &tc.model, &tc, NULL);
    Manifest again;
    if (!manifest_parse(text, strlen(text), "rewritten manifest.json", &again, err, sizeof(err))) {
        fprintf(stderr, "the writer's manifest does not parse: %s\n", err);
        abort();
    }
    if (again.step != m.step || again.rng != m.rng || again.n_files != m.n_files) abort();
    manifest_free(&again);
    free(text);
    manifest_free(&m);
    return 0;
}
