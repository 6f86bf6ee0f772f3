// formats/json.h: strict JSON, for every JSON document zeroc reads from outside (a
// DeepSpeed config, a Hugging Face config.json, a safetensors header, a checkpoint
// manifest). cJSON parses; this file adds the rules of RFC 8259 that cJSON leaves out
// and that DeepSpeed's reader (Python's json, duplicate keys refused) and the
// safetensors reference reader (serde_json) enforce:
//   - nothing but whitespace after the document ("{} x" is refused, not read as {})
//   - no NUL byte anywhere, no \u0000 escape (cJSON would cut a key "a\u0000b" to "a"),
//     no raw control character inside a string
//   - every number a finite double: 1e400 is refused as out of range, not read as
//     infinity (which cJSON prints as null); a non-zero literal that reads as 0
//     (1e-400) likewise
//   - no key twice in one object (sorted, so a header of 100k tensors costs n log n)
//   - numbers in JSON's grammar: 01, 1., .5, +1 and 1.e5 are refused, as Python's json does
//   - no byte-order mark, and nesting at most JSON_MAX_DEPTH deep (cJSON's own limit)
// A problem is one line, "NAME:LINE:COL: what" where the place is known.
#pragma once
#include "util/common.h"
#include <cjson/cJSON.h>
#include <ctype.h>

// "NAME:LINE:COL: " for byte `at` of text (lines and columns from 1)
static int json_where(char *err, size_t errn, const char *name, const char *text, size_t at) {
    int line = 1, col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') { line++; col = 1; }
        else col++;
    }
    return snprintf(err, errn, "%.500s:%d:%d: ", name, line, col);
}

#ifdef CJSON_NESTING_LIMIT
#define JSON_MAX_DEPTH CJSON_NESTING_LIMIT
#else
#define JSON_MAX_DEPTH 1000
#endif

// Whether num[0..len) is a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
static int json_number_ok(const char *num, size_t len) {
    size_t i = 0;
    if (i < len && num[i] == '-') i++;
    if (i < len && num[i] == '0') i++;
    else if (i < len && num[i] >= '1' && num[i] <= '9') while (i < len && isdigit((unsigned char)num[i])) i++;
    else return 0;
    if (i < len && num[i] == '.') {
        if (++i >= len || !isdigit((unsigned char)num[i])) return 0;
        while (i < len && isdigit((unsigned char)num[i])) i++;
    }
    if (i < len && (num[i] == 'e' || num[i] == 'E')) {
        if (++i < len && (num[i] == '+' || num[i] == '-')) i++;
        if (i >= len || !isdigit((unsigned char)num[i])) return 0;
        while (i < len && isdigit((unsigned char)num[i])) i++;
    }
    return i == len;
}

// The lexical rules above, over text[0..n). Returns the offset of the first
// violation with msg saying what it is, or -1.
static long json_scan(const char *text, size_t n, char *msg, size_t msgn) {
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        snprintf(msg, msgn, "a byte-order mark (U+FEFF) before the document: JSON text has none (Python's json refuses it too)");
        return 0;
    }
    long depth = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0) { snprintf(msg, msgn, "a NUL byte (JSON text has none)"); return (long)i; }
        if ((c == '[' || c == '{') && ++depth > JSON_MAX_DEPTH) {
            snprintf(msg, msgn, "nested more than %d levels deep (zeroc's limit for a JSON document)", JSON_MAX_DEPTH);
            return (long)i;
        }
        if (c == ']' || c == '}') depth--;
        if (c == '"') {   // a string: its escapes and raw characters
            for (i++; i < n && text[i] != '"'; i++) {
                unsigned char s = (unsigned char)text[i];
                if (s == 0) { snprintf(msg, msgn, "a NUL byte inside a string"); return (long)i; }
                if (s < 0x20) { snprintf(msg, msgn, "a raw control character (0x%02x) inside a string: JSON needs it escaped", s); return (long)i; }
                if (s != '\\') continue;
                if (i + 5 < n && text[i + 1] == 'u' && !strncmp(text + i + 2, "0000", 4)) {
                    snprintf(msg, msgn, "\\u0000 inside a string: a NUL character, which no key or value here may hold");
                    return (long)i;
                }
                i++;   // the escaped character (cJSON checks the escape itself)
            }
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {   // a number: a finite double
            char num[64];
            size_t k = i;
            while (k < n && text[k] && strchr("+-.eE0123456789", text[k])) k++;
            if (k - i < sizeof(num)) {   // (a longer one is cJSON's syntax error)
                memcpy(num, text + i, k - i);
                num[k - i] = 0;
                if (!json_number_ok(num, k - i)) { snprintf(msg, msgn, "%s is not a JSON number (JSON writes numbers like 1, 0.5, 1e-3)", num); return (long)i; }
                double v = strtod(num, NULL);
                const char *digit = strpbrk(num, "123456789"), *exp = strpbrk(num, "eE");
                if (isinf(v)) { snprintf(msg, msgn, "the number %s is out of range (beyond a double's largest, 1.8e308)", num); return (long)i; }
                if (v == 0 && digit && exp && digit < exp) {
                    snprintf(msg, msgn, "the number %s is out of range (not zero, but below a double's smallest, 4.9e-324)", num);
                    return (long)i;
                }
            }
            i = k - 1;
        }
    }
    return -1;
}

static int json_cmp_keys(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

// A key that appears twice in one object of the tree (its dotted path into dup), or 0.
static int json_find_duplicate(const cJSON *o, const char *prefix, char *dup, size_t dupn) {
    int n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n++;
    if (cJSON_IsObject(o) && n > 1) {
        const char **keys = (const char **)xmalloc(sizeof(char *) * n, "JSON keys");
        int k = 0;
        for (const cJSON *c = o->child; c; c = c->next) keys[k++] = c->string;
        qsort(keys, n, sizeof(char *), json_cmp_keys);
        for (int i = 1; i < n; i++)
            if (!strcmp(keys[i - 1], keys[i])) {
                snprintf(dup, dupn, "%s%s%s", prefix, prefix[0] ? "." : "", keys[i]);
                free(keys);
                return 1;
            }
        free(keys);
    }
    for (const cJSON *c = o->child; c; c = c->next) {
        if (!cJSON_IsObject(c) && !cJSON_IsArray(c)) continue;
        char path[512];
        if (cJSON_IsObject(o)) snprintf(path, sizeof(path), "%s%s%.200s", prefix, prefix[0] ? "." : "", c->string);
        else snprintf(path, sizeof(path), "%s[]", prefix);
        if (json_find_duplicate(c, path, dup, dupn)) return 1;
    }
    return 0;
}

// One JSON document, text[0..n) (it need not be NUL-terminated), parsed under the rules
// above. Returns the tree (any JSON value), or NULL with a one-line err naming `name`.
static cJSON *json_parse_strict(const char *text, size_t n, const char *name, char *err, size_t errn) {
    char what[160];
    long bad = json_scan(text, n, what, sizeof(what));
    if (bad >= 0) {
        int k = json_where(err, errn, name, text, (size_t)bad);
        if (k < (int)errn) snprintf(err + k, errn - k, "%s", what);
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    size_t at = end ? (size_t)(end - text) : 0;
    if (root) {   // only whitespace may follow the document
        while (at < n && strchr(" \t\r\n", text[at])) at++;
        if (at < n) {
            cJSON_Delete(root);
            int k = json_where(err, errn, name, text, at);
            if (k < (int)errn) snprintf(err + k, errn - k, "trailing data after the JSON document");
            return NULL;
        }
    } else {
        if (at > n) at = n;
        size_t rest = at;   // only whitespace left: the document ended before it was complete
        while (rest < n && strchr(" \t\r\n", text[rest])) rest++;
        if (rest == n) at = n;
        int k = json_where(err, errn, name, text, at);
        char near[24] = "";
        size_t m = 0;
        for (size_t i = at; i < n && m < 20 && text[i] != '\n' && text[i] != '\r'; i++) near[m++] = text[i];
        near[m] = 0;
        if (k < (int)errn) {
            if (at >= n) snprintf(err + k, errn - k, "the document ends early (an unclosed object, array or string)");
            else snprintf(err + k, errn - k, "syntax error at '%s'", near);
        }
        return NULL;
    }
    char dup[512];
    if (json_find_duplicate(root, "", dup, sizeof(dup))) {
        snprintf(err, errn, "%.500s: %.300s: duplicate key (a JSON object's keys are unique here: DeepSpeed and the safetensors "
                 "reader refuse duplicates too)", name, dup);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
