// config/json.h: a JSON document read from a file (a DeepSpeed config, a Hugging
// Face config.json) under formats/json.h's strict rules, or one line naming the file
// and exit.
#pragma once
#include "formats/json.h"
#include <sys/stat.h>
#include <ctype.h>

#define JSON_MAX_FILE (1 << 24)   // a config file or config.json: 16 MiB at most

// A JSON object from a regular file (a config file, a Hugging Face config.json), or one line and exit.
static cJSON *json_parse_file_or_die(const char *path) {
    FILE *f = fopen_regular_or_die(path, "rb", "a JSON file");
    long long n = file_size_or_die(f, path);
    if (n > JSON_MAX_FILE) fatal("%s: %lld bytes: too large for a JSON config (at most %d MiB)", path, n, JSON_MAX_FILE >> 20);
    char *text = (char *)xmalloc(n + 1, "config text");
    fread_or_die(text, 1, n, f, path, "config");
    text[n] = 0;
    fclose(f);
    char err[1400];
    cJSON *root = json_parse_strict(text, (size_t)n, path, err, sizeof(err));
    // YAML starts with a key, JSON with a brace: an accelerate config is the likely mix-up
    const char *p = text + strspn(text, " \t\r\n");
    int yaml = !root && (*p == '#' || (isalpha((unsigned char)*p) && strchr(p, ':') && strcspn(p, ":") < strcspn(p, "\n")));
    free(text);
    if (yaml) fatal("%s (YAML, not JSON? this takes a JSON file; an accelerate YAML names its DeepSpeed JSON in "
                    "deepspeed_config_file)", err);
    if (!root) fatal("%s", err);
    if (!cJSON_IsObject(root)) fatal("%s: not a JSON object (the document is %s)", path, cJSON_IsArray(root) ? "an array" : "a single value");
    return root;
}
