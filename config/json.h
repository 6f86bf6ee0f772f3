// config/json.h: a JSON document read from a file (a DeepSpeed config, a Hugging
// Face config.json), or one line naming the file and exit.
#pragma once
#include "util/common.h"
#include <cjson/cJSON.h>

// a JSON object from a file (a config file, a Hugging Face config.json), or one line and exit
static cJSON *json_parse_file_or_die(const char *path) {
    FILE *f = fopen_or_die(path, "rb");
    long long n = file_size_or_die(f, path);
    if (n > (1 << 24)) fatal("%s: file too large for a JSON config", path);
    char *text = (char *)xmalloc(n + 1, "config text");
    fread_or_die(text, 1, n, f, path, "config");
    text[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) fatal("%s: not a JSON object (near '%.20s')", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    free(text);
    return root;
}
