// Fuzz target: a DeepSpeed JSON config (config/ds_config.h): the strict parse (formats/json.h: NUL bytes,
// trailing data, numbers out of range, duplicate keys), the whole pass over the file and the checks that
// follow the flags, collecting messages (the trainer prints them and exits on an error).
#include "config/flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1400];
    cJSON *root = json_parse_strict((const char *)data, size, "fuzz.json", err, sizeof(err));   // as the trainer reads a file
    if (root && cJSON_IsObject(root)) {
        TrainConfig c;
        train_config_defaults(&c);
        model_apply_preset(&c.model, ARCH_GPT2, "tiny");
        ConfigReport r = {"fuzz.json", NULL, 0, 0, 0};
        ds_config_apply_json(&c, root, &r);
        config_check(&c, &r);
        report_free(&r);
    }
    cJSON_Delete(root);
    return 0;
}
