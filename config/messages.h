// config/messages.h: what the configuration checks say, collected over the whole
// configuration (the DeepSpeed file, then the flags) and printed together.
#pragma once
#include "util/common.h"
#include <ctype.h>

// Messages are collected over the whole file and the checks after the flags, then
// printed together. Errors go out on every rank, so whichever rank's exit ends the
// job has said why; warnings and notes go out on the printing rank only.

enum { MSG_NOTE, MSG_WARNING, MSG_ERROR };
static const char *MSG_LEVELS[] = {"note", "warning", "error"};

typedef struct { int level; char text[1024]; } ConfigMsg;
typedef struct {
    const char *file;   // the config file ("" without one)
    ConfigMsg *msg;
    int n, cap, errors;
} ConfigReport;

// One message about a setting. `where` is a flag ("--lr"), a key path of the config
// file, which the message names with the file, or NULL for no particular place.
static void report_at(ConfigReport *r, int level, const char *where, const char *fmt, ...) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        ConfigMsg *m = (ConfigMsg *)xmalloc(r->cap * sizeof(ConfigMsg), "config messages");
        if (r->n) memcpy(m, r->msg, r->n * sizeof(ConfigMsg));
        free(r->msg);
        r->msg = m;
    }
    ConfigMsg *m = &r->msg[r->n++];
    m->level = level;
    int k = 0;
    if (where && strncmp(where, "--", 2) == 0) k = snprintf(m->text, sizeof(m->text), "%s: ", where);
    else if (where) k = snprintf(m->text, sizeof(m->text), "%s: %s: ", r->file, where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text + k, sizeof(m->text) - k, fmt, ap);
    va_end(ap);
    if (level == MSG_ERROR) r->errors++;
}

static void report_free(ConfigReport *r) {
    free(r->msg);
    r->msg = NULL; r->n = r->cap = r->errors = 0;
}

// Print everything collected; end the run (exit 1) if there was an error.
static void report_finish(ConfigReport *r, int print_rank) {
    for (int i = 0; i < r->n; i++)
        if (r->msg[i].level == MSG_ERROR || print_rank) diag(MSG_LEVELS[r->msg[i].level], "%s", r->msg[i].text);
    int errors = r->errors;
    report_free(r);
    if (errors) exit(1);
}

// edit distance (insert, delete, substitute; letters compared case-insensitively)
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

// The one rule for every did-you-mean (flags, presets, config keys): at most 3 edits, and at
// most a third of the shorter name, so that "--x" or "--" suggest nothing.
static int likely_misspelling(const char *typed, const char *known, int d) {
    int la = (int)strlen(typed), lb = (int)strlen(known), shorter = la < lb ? la : lb;
    return la > 0 && d <= 3 && 3 * d <= shorter + 2;
}
