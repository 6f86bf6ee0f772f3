// train/jsonl.h: the --log file, one JSON object per line, written by rank 0.
// One function per record type. The reports of train/zero_report.h build their own
// records (memory, comm, estimate) and hand them to jsonl_record.
//   {"type":"train", "step", "loss", "lr", "grad_norm", "tokens_per_sec", "ms", "skipped", "skipped_steps",
//    "elapsed_s", "gflops", "mem_bytes" [, "skip_reason"][, "loss_scale"][, "peak_live_elems"][, "mfu"]
//    [, "qwz_rel_rms_error"][, "qgz_rel_rms_error"] (ZeRO++: the relative RMS error of what each quantizer sent)
//    [, "forward_ms", "backward_ms", "comm_wait_ms", "optimizer_ms": --breakdown 1]}
//   {"type":"val", "step", "val_loss"}
//   {"type":"sample", "step", "tokens": [[ids of sample 1], ...]}: --sample-every's samples, as token ids
//    (their text need not be UTF-8), so that a resumed run's can be compared with an unbroken run's
// A number that is not finite is written as the string "nan", "inf" or "-inf".
// JSON has no such numbers and cJSON would write null; as strings Python's float()
// reads them back, and a reader can tell a diverged loss from a missing one.
//   {"type":"config", ...}: the resolved configuration, first (config/ds_config.h's config_json_record)
//   {"type":"memory", ...}, {"type":"comm", ...}, {"type":"estimate", ...}: train/zero_report.h
#pragma once
#include "util/common.h"
#include <cjson/cJSON.h>

typedef struct { FILE *f; const char *path; } JsonLog;   // f == NULL: not logging (no --log, or not rank 0)

// A resumed run continues the log of the run it resumes: what an earlier run wrote after the
// checkpoint's step is stale, so the file is cut at the first record past that step, as the
// TensorBoard and CSV monitors are cut (docs/checkpoints.md). A torn last line goes too; a line
// that does not parse is kept, since it proves nothing about the steps.
static void jsonl_cut_after(const char *path, int step) {
    char err[1400];
    FILE *f = fopen_regular(path, "r+b", "a regular file for --log", err, sizeof(err));
    if (!f) return;   // no log yet: nothing to cut (what is not a regular file, jsonl_open refuses)
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    off_t end = 0;
    long removed = 0;
    int cutting = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        cJSON *rec = line[len - 1] == '\n' ? cJSON_Parse(line) : NULL;
        const cJSON *st = cJSON_GetObjectItem(rec, "step");
        if (line[len - 1] != '\n' || (cJSON_IsNumber(st) && st->valuedouble > step)) cutting = 1;
        cJSON_Delete(rec);
        if (cutting) removed++;
        else end += (off_t)len;
    }
    free(line);
    if (removed && ftruncate(fileno(f), end) != 0) fatal("%s: cannot cut the log at step %d (%s)", path, step, strerror(errno));
    fclose(f);
    if (removed) diag("note", "%s: %ld record%s of an earlier run after step %d removed: this run continues from there", path, removed,
                      removed == 1 ? "" : "s", step);
}

// resume_step > 0: append after cutting what follows that step; 0: a new log
static JsonLog jsonl_open(const char *path, int writer, int resume_step) {
    JsonLog l = {NULL, path};
    struct stat sb;
    // a terminal, /dev/null or /dev/full takes a stream; a FIFO would block the open: refused with anything else not a file
    if (writer && path[0] && stat(path, &sb) == 0 && S_ISCHR(sb.st_mode)) l.f = fopen_or_die(path, "wb");
    else if (writer && path[0]) {
        if (resume_step > 0) jsonl_cut_after(path, resume_step);
        l.f = fopen_regular_or_die(path, resume_step > 0 ? "ab" : "wb", "a regular file for --log");
    }
    return l;
}
static void jsonl_close(JsonLog *l) { if (l->f) fclose(l->f); l->f = NULL; }

// writes the record (if logging) and frees it
static void jsonl_record(JsonLog *l, cJSON *rec) {
    if (l->f) {
        char *s = cJSON_PrintUnformatted(rec);
        // a log that cannot be written, on a full disk, is not worth the run: say so once, stop logging
        if (fprintf(l->f, "%s\n", s) < 0 || fflush(l->f) != 0) {
            diag("warning", "%s: write failed (%s): the log stops here, training goes on", l->path, strerror(errno));
            fclose(l->f);
            l->f = NULL;
        }
        free(s);
    }
    cJSON_Delete(rec);
}

// a number, or for Inf / NaN the string "inf", "-inf" or "nan"
static void jsonl_add_number(cJSON *r, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(r, key, v);
    else cJSON_AddStringToObject(r, key, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

// what one optimizer step did
typedef struct {
    int step;                   // 1-based, after the update
    float loss, lr, grad_norm;  // grad_norm: of the unscaled gradients
    double ms, tokens_per_sec;
    long long peak_live_elems;  // stage 3: most gathered parameter elements alive; -1: not stage 3
    const char *skipped;        // why this step was skipped (train/step_guard.h), NULL: applied
    long long skipped_steps;    // steps skipped so far, this one included
    double loss_scale;          // fp16: the loss scale this step's backward used; 0: no fp16
    double gflops, mfu;         // achieved model FLOP/s (PaLM/llm.c count); mfu: of the peak, -1 without one
    double mem_bytes;           // memory in use: the GPU's (all of it), or this process's resident memory
    double elapsed_s, eta_s;    // since the loop started; to the last step at this run's mean pace
    double phase_ms[4];         // --breakdown: forward, backward, communication wait, optimizer; [0] < 0: off
    float quant_error[2];       // ZeRO++: the step's relative RMS error, qwZ's int8 and qgZ's int4; < 0: off
} StepStats;
static const char *const PHASE_NAMES[4] = {"forward_ms", "backward_ms", "comm_wait_ms", "optimizer_ms"};

static void jsonl_train(JsonLog *l, const StepStats *s) {
    if (!l->f) return;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "train");
    cJSON_AddNumberToObject(r, "step", s->step);
    jsonl_add_number(r, "loss", s->loss);
    cJSON_AddNumberToObject(r, "lr", s->lr);
    jsonl_add_number(r, "grad_norm", s->grad_norm);
    cJSON_AddNumberToObject(r, "tokens_per_sec", s->tokens_per_sec);
    cJSON_AddNumberToObject(r, "ms", s->ms);
    cJSON_AddBoolToObject(r, "skipped", s->skipped != NULL);
    if (s->skipped) cJSON_AddStringToObject(r, "skip_reason", s->skipped);
    cJSON_AddNumberToObject(r, "skipped_steps", (double)s->skipped_steps);
    if (s->loss_scale > 0) cJSON_AddNumberToObject(r, "loss_scale", s->loss_scale);
    if (s->peak_live_elems >= 0) cJSON_AddNumberToObject(r, "peak_live_elems", (double)s->peak_live_elems);
    if (s->quant_error[0] >= 0) jsonl_add_number(r, "qwz_rel_rms_error", s->quant_error[0]);
    if (s->quant_error[1] >= 0) jsonl_add_number(r, "qgz_rel_rms_error", s->quant_error[1]);
    cJSON_AddNumberToObject(r, "elapsed_s", s->elapsed_s);
    cJSON_AddNumberToObject(r, "gflops", s->gflops);
    if (s->mfu >= 0) cJSON_AddNumberToObject(r, "mfu", s->mfu);
    cJSON_AddNumberToObject(r, "mem_bytes", s->mem_bytes);
    for (int i = 0; i < 4 && s->phase_ms[0] >= 0; i++) cJSON_AddNumberToObject(r, PHASE_NAMES[i], s->phase_ms[i]);
    jsonl_record(l, r);
}

static void jsonl_val(JsonLog *l, int step, float val_loss) {
    if (!l->f) return;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "val");
    cJSON_AddNumberToObject(r, "step", step);
    jsonl_add_number(r, "val_loss", val_loss);
    jsonl_record(l, r);
}

// n sequences of len token ids each, `stride` apart in seq
static void jsonl_sample(JsonLog *l, int step, const int *seq, int n, int len, int stride) {
    if (!l->f) return;
    cJSON *r = cJSON_CreateObject(), *all = cJSON_CreateArray();
    cJSON_AddStringToObject(r, "type", "sample");
    cJSON_AddNumberToObject(r, "step", step);
    for (int b = 0; b < n; b++) cJSON_AddItemToArray(all, cJSON_CreateIntArray(seq + (size_t)b * stride, len));
    cJSON_AddItemToObject(r, "tokens", all);
    jsonl_record(l, r);
}
