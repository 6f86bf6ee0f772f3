// train/checkpoint_format.h: the two checkpoint formats a resume parses, without the model:
// the manifest (manifest.json) and the optimizer shard header. train/checkpoint.h writes
// and reads checkpoints with them; tests/fuzz/ fuzzes the parsers on their own.
//
// manifest.json (format 2), one JSON object:
//   format, step, rng (16 hex digits), zero_stage, world, partitions, align,
//   num_params, model {arch, n_layer, ...}, train {batch, seq, accum, total_batch, lr,
//   steps, lr_total_steps (the schedule's horizon; both since 2026-11: optional),
//   train (the --train path), train_tokens, train_crc32 (dataloader_fingerprint)},
//   files [{name, bytes, crc32}: model.bin, then optim_rank_00000.bin ...],
//   the sections other headers write and read themselves: data, the loader's position
//   and shuffle state (dataloader.h); skipped_steps, consecutive_skips and
//   loss_scaler (train/step_guard.h),
//   manifest_crc32: the CRC-32 of the manifest's own canonical text, which is the
//   object without this key printed by cJSON_PrintUnformatted. Editing any value, such
//   as the step or the data position, breaks it; reformatting the file does not.
// Format 1 manifests predate the checksum: they have no manifest_crc32, no
// train_tokens and no train_crc32, and the oldest have a token offset "data_pos"
// instead of "data". They are accepted with a note saying what cannot be checked;
// their files are still checked against their sizes and CRC-32s.
//
// optim_rank_RRRRR.bin: a header of 256 int32 [0] OPTIM_MAGIC [1] version 1
// [2] partitions [3] this partition [4] units [5] alignment [6,7] shard elements
// (low, high), then m and v, shard elements each, fp32.
#pragma once
#include "config/train_config.h"

#define MANIFEST_FORMAT 2
#define OPTIM_MAGIC 20251123
#define MANIFEST_MAX_PARTITIONS (1 << 20)

// ----------------------------------------------------------------------------
// the manifest

typedef struct { char name[64]; long long bytes; uint32_t crc; } ManifestFile;

typedef struct {
    int format, checksummed;        // checksummed: carries manifest_crc32 (format 2)
    int step;                       // optimizer steps completed
    uint64_t rng;                   // sampling RNG state
    int zero_stage, world, partitions, align;
    long long num_params;
    // what the run trained on; -1 / "" where a format-1 manifest lacks them
    int batch, seq, accum, total_batch;
    int steps, lr_total_steps;      // the run's --steps and its schedule's horizon; -1 in manifests before them
    char train_path[512];
    long long train_tokens;
    uint32_t train_crc;
    int n_files;
    ManifestFile *files;            // model.bin, then the partitions' optimizer files
    cJSON *json;                    // the whole manifest, for the sections other headers read (data, skips)
} Manifest;

static void manifest_free(Manifest *m) { free(m->files); cJSON_Delete(m->json); m->files = NULL; m->json = NULL; }

// the CRC-32 of the canonical text of m without its manifest_crc32 key
static uint32_t manifest_canonical_crc(cJSON *m) {
    cJSON *own = cJSON_DetachItemFromObjectCaseSensitive(m, "manifest_crc32");
    char *text = cJSON_PrintUnformatted(m);
    uint32_t crc = text ? crc32_update(0, text, strlen(text)) : 0;
    free(text);
    if (own) cJSON_AddItemToObject(m, "manifest_crc32", own);
    return crc;
}

// The manifest's text, from cJSON_Print and to be freed, for a checkpoint of m, whose
// files are filled in, of the model mc trained with tc. The items of `sections`, such
// as the data position and the skips, join it and are consumed.
static char *manifest_text(const Manifest *m, const ModelConfig *mc, const TrainConfig *tc, cJSON *sections) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "format", MANIFEST_FORMAT);
    cJSON_AddNumberToObject(j, "step", m->step);
    char hex[32];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)m->rng);
    cJSON_AddStringToObject(j, "rng", hex);
    cJSON_AddNumberToObject(j, "zero_stage", m->zero_stage);
    cJSON_AddNumberToObject(j, "world", m->world);
    cJSON_AddNumberToObject(j, "partitions", m->partitions);
    cJSON_AddNumberToObject(j, "align", m->align);
    cJSON_AddNumberToObject(j, "num_params", (double)m->num_params);
    cJSON *mo = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(mo, "arch", arch_name(mc->arch));
    cJSON_AddNumberToObject(mo, "n_layer", mc->n_layer);
    cJSON_AddNumberToObject(mo, "n_head", mc->n_head);
    cJSON_AddNumberToObject(mo, "n_kv_head", mc->n_kv_head);
    cJSON_AddNumberToObject(mo, "d_model", mc->d_model);
    cJSON_AddNumberToObject(mo, "d_ff", mc->d_ff);
    cJSON_AddNumberToObject(mo, "vocab_size", mc->vocab_size);
    cJSON_AddNumberToObject(mo, "max_seq", mc->max_seq);
    cJSON *tr = cJSON_AddObjectToObject(j, "train");
    cJSON_AddNumberToObject(tr, "batch", tc->B);
    cJSON_AddNumberToObject(tr, "seq", tc->T);
    cJSON_AddNumberToObject(tr, "accum", tc->accum);
    cJSON_AddNumberToObject(tr, "total_batch", tc->total_batch);
    cJSON_AddNumberToObject(tr, "lr", tc->lr);
    cJSON_AddNumberToObject(tr, "steps", tc->steps);
    cJSON_AddNumberToObject(tr, "lr_total_steps", lr_total_steps(tc));
    cJSON_AddStringToObject(tr, "train", tc->train_path);
    cJSON_AddNumberToObject(tr, "train_tokens", (double)m->train_tokens);
    snprintf(hex, sizeof(hex), "%08x", m->train_crc);
    cJSON_AddStringToObject(tr, "train_crc32", hex);
    while (sections && sections->child) {
        cJSON *item = sections->child;
        cJSON_AddItemToObject(j, item->string, cJSON_DetachItemViaPointer(sections, item));
    }
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (int i = 0; i < m->n_files; i++) {
        cJSON *fe = cJSON_CreateObject();
        cJSON_AddStringToObject(fe, "name", m->files[i].name);
        cJSON_AddNumberToObject(fe, "bytes", (double)m->files[i].bytes);
        snprintf(hex, sizeof(hex), "%08x", m->files[i].crc);
        cJSON_AddStringToObject(fe, "crc32", hex);
        cJSON_AddItemToArray(files, fe);
    }
    snprintf(hex, sizeof(hex), "%08x", manifest_canonical_crc(j));
    cJSON_AddStringToObject(j, "manifest_crc32", hex);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

#define MF_FAIL(...) do { snprintf(err, errn, __VA_ARGS__); cJSON_Delete(j); manifest_free(m); return 0; } while (0)

// a JSON integer within [lo, hi], or 0
static int mf_int(cJSON *obj, const char *key, double lo, double hi, long long *out) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != floor(v->valuedouble)) return 0;
    *out = (long long)v->valuedouble;
    return 1;
}
// 1..16 hex digits, or 0
static int mf_hex(cJSON *obj, const char *key, int digits, uint64_t *out) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) != (size_t)digits || strspn(v->valuestring, "0123456789abcdef") != (size_t)digits) return 0;
    *out = strtoull(v->valuestring, NULL, 16);
    return 1;
}

// Parses the manifest's n bytes of text into m and checks its own checksum, every
// field's type and range, and the file list: the model plus one per partition.
// `path` names it in messages. Returns 1, or 0 with a one-line err and m freed.
static int manifest_parse(const char *text, size_t n, const char *path, Manifest *m, char *err, size_t errn) {
    memset(m, 0, sizeof(*m));
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (!j || !cJSON_IsObject(j)) MF_FAIL("%s: not valid JSON (a damaged manifest)", path);
    uint64_t own;
    if (cJSON_GetObjectItemCaseSensitive(j, "manifest_crc32")) {
        if (!mf_hex(j, "manifest_crc32", 8, &own)) MF_FAIL("%s: manifest_crc32 is not 8 hex digits", path);
        uint32_t crc = manifest_canonical_crc(j);
        if (crc != (uint32_t)own)
            MF_FAIL("%s: the manifest's checksum %08x does not match its content (%08x): edited or damaged", path, (uint32_t)own, crc);
        m->checksummed = 1;
    }
    long long v;
    uint64_t h;
#define MF_NUM(obj, key, lo, hi, dst) do { if (!mf_int(obj, key, lo, hi, &v)) MF_FAIL("%s: %s is missing or not an integer in [%.0f, %.0f]", path, key, (double)(lo), (double)(hi)); dst = v; } while (0)
    MF_NUM(j, "format", 1, MANIFEST_FORMAT, m->format);
    if (m->format >= 2 && !m->checksummed) MF_FAIL("%s: format %d manifest without its manifest_crc32", path, m->format);
    MF_NUM(j, "step", 0, 1 << 30, m->step);
    if (!mf_hex(j, "rng", 16, &h)) MF_FAIL("%s: rng is missing or not 16 hex digits", path);
    m->rng = h;
    MF_NUM(j, "zero_stage", 0, 3, m->zero_stage);
    MF_NUM(j, "world", 1, MANIFEST_MAX_PARTITIONS, m->world);
    MF_NUM(j, "partitions", 1, MANIFEST_MAX_PARTITIONS, m->partitions);
    MF_NUM(j, "align", 1, 1 << 20, m->align);
    MF_NUM(j, "num_params", 1, 9e15, m->num_params);
    m->batch = m->seq = m->accum = m->total_batch = m->steps = m->lr_total_steps = -1;
    m->train_tokens = -1;
    cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "train");
    if (cJSON_IsObject(tr)) {
        MF_NUM(tr, "batch", 1, 1 << 20, m->batch);
        MF_NUM(tr, "seq", 1, 1 << 20, m->seq);
        MF_NUM(tr, "accum", 1, 1 << 20, m->accum);
        MF_NUM(tr, "total_batch", 1, 1 << 30, m->total_batch);
        if (mf_int(tr, "steps", 0, 1 << 30, &v)) m->steps = (int)v;
        if (mf_int(tr, "lr_total_steps", 0, 1 << 30, &v)) m->lr_total_steps = (int)v;
        cJSON *tp = cJSON_GetObjectItemCaseSensitive(tr, "train");
        if (!cJSON_IsString(tp) || strlen(tp->valuestring) >= sizeof(m->train_path)) MF_FAIL("%s: train.train is missing or too long", path);
        strcpy(m->train_path, tp->valuestring);
        if (m->format >= 2) {
            MF_NUM(tr, "train_tokens", 0, 9e15, m->train_tokens);
            if (!mf_hex(tr, "train_crc32", 8, &h)) MF_FAIL("%s: train.train_crc32 is missing or not 8 hex digits", path);
            m->train_crc = (uint32_t)h;
        }
    } else if (m->format >= 2) MF_FAIL("%s: the train block is missing", path);
    cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    if (!cJSON_IsArray(files)) MF_FAIL("%s: files is missing or not an array", path);
    m->n_files = cJSON_GetArraySize(files);
    if (m->n_files != m->partitions + 1)
        MF_FAIL("%s: %d files listed, expected %d for %d partitions", path, m->n_files, m->partitions + 1, m->partitions);
    m->files = (ManifestFile *)xcalloc(sizeof(ManifestFile) * m->n_files, "manifest files");
    int i = 0;
    for (cJSON *fe = files->child; fe; fe = fe->next, i++) {
        char want[64];
        if (i == 0) snprintf(want, sizeof(want), "model.bin");
        else snprintf(want, sizeof(want), "optim_rank_%05d.bin", i - 1);
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(fe, "name");
        if (!cJSON_IsString(fn) || strcmp(fn->valuestring, want) != 0) MF_FAIL("%s: file entry %d is not %s", path, i, want);
        strcpy(m->files[i].name, want);
        if (!mf_int(fe, "bytes", 0, 9e15, &m->files[i].bytes) || !mf_hex(fe, "crc32", 8, &h))
            MF_FAIL("%s: file entry %d (%s): bytes or crc32 missing or malformed", path, i, want);
        m->files[i].crc = (uint32_t)h;
    }
#undef MF_NUM
    m->json = j;
    return 1;
}
#undef MF_FAIL

// ----------------------------------------------------------------------------
// the optimizer shard header

static void optim_header(int32_t h[256], int partitions, int part, int n_units, int align, size_t shard_elems) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = OPTIM_MAGIC; h[1] = 1; h[2] = partitions; h[3] = part; h[4] = n_units; h[5] = align;
    h[6] = (int32_t)(shard_elems & 0xFFFFFFFFu); h[7] = (int32_t)(shard_elems >> 32);
}

// Checks the header of partition `part` of a checkpoint with `partitions` partitions
// whose plan gives shard_elems elements per partition; file_bytes is the file's size.
static int optim_header_check(const int32_t h[256], int partitions, int part, size_t shard_elems, long long file_bytes,
                              const char *path, char *err, size_t errn) {
    size_t elems = (size_t)(uint32_t)h[6] | ((size_t)(uint32_t)h[7] << 32);
    if (h[0] != OPTIM_MAGIC) { snprintf(err, errn, "%s: bad magic number %d (expected %d): not an optimizer shard", path, h[0], OPTIM_MAGIC); return 0; }
    if (h[1] != 1) { snprintf(err, errn, "%s: unsupported optimizer shard version %d (expected 1)", path, h[1]); return 0; }
    if (h[2] != partitions || h[3] != part)
        { snprintf(err, errn, "%s: partition %d of %d in the header, the manifest says %d of %d", path, h[3], h[2], part, partitions); return 0; }
    if (elems != shard_elems)
        { snprintf(err, errn, "%s: %zu elements per shard in the header, the checkpoint's plan gives %zu", path, elems, shard_elems); return 0; }
    if (file_bytes != 1024 + 8 * (long long)shard_elems)
        { snprintf(err, errn, "%s: %lld bytes, expected %lld for %zu elements of m and v", path, file_bytes, 1024 + 8 * (long long)shard_elems, shard_elems); return 0; }
    return 1;
}
