// formats/safetensors.h: Hugging Face's safetensors file format, written and read
// without the safetensors library. The format, as the reference implementation
// defines and validates it (huggingface/safetensors, safetensors/src/tensor.rs):
//
//   8 bytes     N, little-endian uint64: the length of the header
//   N bytes     JSON header: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [d0, d1],
//               "data_offsets": [begin, end]}, ...}; padded with spaces so the data starts
//               at a multiple of 8
//   the rest    every tensor's raw little-endian row-major bytes; offsets are relative to the
//               start of this data, and the tensors tile it exactly: no gap, overlap or tail
//
// The writer lays tensors out back to back in the order given and streams their data. The
// reader makes the reference reader's checks of every rule above, in the same order, and
// reads one tensor at a time. So neither needs a whole model in memory. The header is JSON
// as strict as the reference reader's (formats/json.h): no NUL, no trailing data, no name
// twice, checked by sorting, so 100k tensors cost n log n. zeroc reads at most
// ST_MAX_TENSORS tensors. What the tensors mean, their names, layouts and dtype
// conversion, is model/hf.h's business.
#pragma once
#include "formats/json.h"

#define ST_MAX_HEADER 100000000ULL   // the reference reader's limit, MAX_HEADER_SIZE
#define ST_MAX_TENSORS (1 << 18)     // zeroc's cap: a model of 1024 layers has 12,290 tensors, and a
                                     // header of 100 MB could name about 2M empty ones
#define ST_MAX_DIMS 8

// the dtypes of the format and their sizes in bytes; zeroc converts F32, BF16 and F16 (model/hf.h)
enum { ST_F32, ST_BF16, ST_F16, ST_F64, ST_I64, ST_U64, ST_I32, ST_U32, ST_I16, ST_U16, ST_I8, ST_U8, ST_BOOL,
       ST_F8_E4M3, ST_F8_E5M2, ST_N_DTYPES };
static const char *ST_DTYPE_NAMES[ST_N_DTYPES] = {"F32", "BF16", "F16", "F64", "I64", "U64", "I32", "U32", "I16", "U16",
                                                  "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
static const int ST_DTYPE_SIZES[ST_N_DTYPES] = {4, 2, 2, 8, 8, 8, 4, 4, 2, 2, 1, 1, 1, 1, 1};

static int st_dtype_from_name(const char *s) {
    for (int i = 0; i < ST_N_DTYPES; i++) if (strcmp(s, ST_DTYPE_NAMES[i]) == 0) return i;
    return -1;
}

typedef struct {
    const char *name;           // points into the parsed header, STFile.json
    int dtype, ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;        // byte offsets relative to the start of the data
    size_t numel;
} STTensor;

// "[d0, d1]" for messages
static const char *st_shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
    int k = snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < (int)n; i++) k += snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < (int)n) snprintf(buf + k, n - k, "]");
    return buf;
}

// ----------------------------------------------------------------------------
// writing

typedef struct { char name[128]; int dtype, ndim; int64_t shape[ST_MAX_DIMS]; } STSpec;

typedef struct {
    FILE *f;
    const char *path;
    uint64_t expect, written;   // data bytes the header promised / written so far
} STWriter;

// Writes the header for t[0..n), laid out back to back in this order, with
// __metadata__ {"format": format}; transformers refuses a file without "pt" there.
// The caller then writes each tensor's bytes in the same order.
static void st_writer_begin(STWriter *w, FILE *f, const char *path, const STSpec *t, int n, const char *format) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", format);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(e, "dtype", ST_DTYPE_NAMES[t[i].dtype]);
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
            numel *= (uint64_t)t[i].shape[d];
        }
        uint64_t bytes = numel * ST_DTYPE_SIZES[t[i].dtype];
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + bytes)));
        off += bytes;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) fatal("%s: cannot build the safetensors header", path);
    uint64_t len = strlen(json), padded = (len + 7) / 8 * 8;
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)(padded >> (8 * i));
    fwrite_or_die(n8, 1, 8, f, path);
    fwrite_or_die(json, 1, len, f, path);
    for (uint64_t i = len; i < padded; i++) fwrite_or_die(" ", 1, 1, f, path);
    free(json);
    w->f = f; w->path = path; w->expect = off; w->written = 0;
}

static void st_writer_put(STWriter *w, const void *data, size_t nbytes) {
    if (w->written + nbytes > w->expect) fatal("%s: more tensor data than the header describes", w->path);
    fwrite_or_die(data, 1, nbytes, w->f, w->path);
    w->written += nbytes;
}

static void st_writer_end(STWriter *w) {
    if (w->written != w->expect)
        fatal("%s: wrote %llu bytes of tensor data, the header describes %llu", w->path,
              (unsigned long long)w->written, (unsigned long long)w->expect);
}

// ----------------------------------------------------------------------------
// reading

typedef struct {
    FILE *f;
    char path[1024];
    uint64_t data_start;        // 8 + N
    int n;
    STTensor *t;                // sorted by begin
    const STTensor **by_name;   // the same, sorted by name (st_find)
    cJSON *json;
} STFile;

// A file whose name ends in .safetensors, or whose first bytes are a plausible
// header length followed by '{'. A zeroc model file starts with its magic number
// and version, which read as a length are far beyond ST_MAX_HEADER.
static int st_sniff(const char *path) {
    size_t n = strlen(path);
    if (n >= 12 && strcmp(path + n - 12, ".safetensors") == 0) return 1;
    char err[1400];
    FILE *f = fopen_regular(path, "rb", "a model file", err, sizeof(err));   // not a regular file: the caller's open says so
    if (!f) return 0;
    uint8_t b[9];
    int ok = fread(b, 1, 9, f) == 9;
    fclose(f);
    if (!ok) return 0;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)b[i] << (8 * i);
    return len >= 2 && len <= ST_MAX_HEADER && b[8] == '{';
}

static int st_cmp_begin(const void *a, const void *b) {
    const STTensor *x = (const STTensor *)a, *y = (const STTensor *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp((*(const STTensor *const *)a)->name, (*(const STTensor *const *)b)->name);
}

static void st_close(STFile *s) {
    if (s->f) fclose(s->f);
    free(s->t);
    free(s->by_name);
    cJSON_Delete(s->json);
    memset(s, 0, sizeof(*s));
}

#define ST_FAIL(...) do { snprintf(err, errn, __VA_ARGS__); st_close(s); return 0; } while (0)

// Checks the header length hn, the file's first 8 bytes, against the format's limit
// and the file's size. Returns 1, or 0 with a one-line err.
static int st_check_length(const char *path, uint64_t hn, uint64_t size, char *err, size_t errn) {
    if (hn > ST_MAX_HEADER) {
        snprintf(err, errn, "%s: header length %llu exceeds the format's limit of %llu bytes (not a safetensors file?)", path,
                 (unsigned long long)hn, ST_MAX_HEADER);
        return 0;
    }
    if (8 + hn > size) {
        snprintf(err, errn, "%s: truncated file: the header is %llu bytes but the file has only %llu after the length", path,
                 (unsigned long long)hn, (unsigned long long)(size - 8));
        return 0;
    }
    return 1;
}

// Checks the JSON header `text`, hn bytes of a safetensors file of file_size bytes, as the
// reference reader does, and fills s's index with the tensors sorted by offset. Returns 1,
// or 0 with a one-line err and s closed. tests/fuzz/ fuzzes it.
static int st_parse_header(STFile *s, const char *path, const char *text, uint64_t hn, uint64_t file_size, char *err, size_t errn) {
    if (hn == 0 || text[0] != '{') ST_FAIL("%s: the header does not start with '{' (not a safetensors file)", path);
    char why[1024];
    s->json = json_parse_strict(text, hn, "header", why, sizeof(why));   // duplicate names refused there, in n log n
    if (!s->json) ST_FAIL("%s: the header is not valid JSON (%s)", path, why);
    if (!cJSON_IsObject(s->json)) ST_FAIL("%s: the header is not a JSON object", path);
    s->data_start = 8 + hn;
    int cap = cJSON_GetArraySize(s->json);
    int tensors = cap - (cJSON_GetObjectItemCaseSensitive(s->json, "__metadata__") != NULL);
    if (tensors > ST_MAX_TENSORS) ST_FAIL("%s: the header lists %d tensors; zeroc reads at most %d", path, tensors, ST_MAX_TENSORS);
    s->t = (STTensor *)xcalloc(sizeof(STTensor) * (cap + 1), "safetensors index");
    char shp[128];
    for (cJSON *e = s->json->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) ST_FAIL("%s: __metadata__ is not an object", path);
            for (cJSON *m = e->child; m; m = m->next)
                if (!cJSON_IsString(m)) ST_FAIL("%s: __metadata__.%s is not a string", path, m->string);
            continue;
        }
        STTensor *t = &s->t[s->n++];
        t->name = e->string;
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
            ST_FAIL("%s: tensor %s: needs \"dtype\", \"shape\" and \"data_offsets\" [begin, end]", path, e->string);
        t->dtype = st_dtype_from_name(dt->valuestring);
        if (t->dtype < 0) ST_FAIL("%s: tensor %s: unknown dtype \"%s\"", path, e->string, dt->valuestring);
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > ST_MAX_DIMS) ST_FAIL("%s: tensor %s: %d dimensions (at most %d)", path, e->string, t->ndim, ST_MAX_DIMS);
        double numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            cJSON *x = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble != floor(x->valuedouble) || x->valuedouble > 9e15)
                ST_FAIL("%s: tensor %s: bad shape", path, e->string);
            t->shape[d] = (int64_t)x->valuedouble;
            numel *= x->valuedouble;
        }
        if (numel > 9e15) ST_FAIL("%s: tensor %s: shape %s is too large", path, e->string, st_shape_str(t->shape, t->ndim, shp, sizeof(shp)));
        t->numel = (size_t)numel;
        cJSON *b = cJSON_GetArrayItem(of, 0), *en = cJSON_GetArrayItem(of, 1);
        if (!cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble < 0 || en->valuedouble < b->valuedouble ||
            b->valuedouble != floor(b->valuedouble) || en->valuedouble != floor(en->valuedouble) || en->valuedouble > 9e15)
            ST_FAIL("%s: tensor %s: bad data_offsets", path, e->string);
        t->begin = (uint64_t)b->valuedouble;
        t->end = (uint64_t)en->valuedouble;
        if (t->end - t->begin != (uint64_t)t->numel * ST_DTYPE_SIZES[t->dtype])
            ST_FAIL("%s: tensor %s: data_offsets span %llu bytes, but %s %s needs %llu", path, e->string,
                    (unsigned long long)(t->end - t->begin), ST_DTYPE_NAMES[t->dtype], st_shape_str(t->shape, t->ndim, shp, sizeof(shp)),
                    (unsigned long long)t->numel * ST_DTYPE_SIZES[t->dtype]);
    }
    // the index by name (st_find)
    s->by_name = (const STTensor **)xmalloc(sizeof(STTensor *) * (s->n + 1), "safetensors index");
    // the tensors tile the data exactly
    qsort(s->t, s->n, sizeof(STTensor), st_cmp_begin);
    for (int i = 0; i < s->n; i++) s->by_name[i] = &s->t[i];
    qsort(s->by_name, s->n, sizeof(STTensor *), st_cmp_name);
    uint64_t at = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->t[i].begin != at)
            ST_FAIL("%s: tensor %s: data starts at byte %llu, expected %llu (tensors must tile the data without gaps or overlaps)",
                    path, s->t[i].name, (unsigned long long)s->t[i].begin, (unsigned long long)at);
        at = s->t[i].end;
    }
    if (s->data_start + at != file_size)
        ST_FAIL("%s: %s file: the header describes %llu bytes of tensor data, the file holds %llu", path,
                s->data_start + at > file_size ? "truncated" : "oversized", (unsigned long long)at, (unsigned long long)(file_size - s->data_start));
    return 1;
}

// Opens and validates a safetensors file. Returns 1, or 0 with a one-line err.
static int st_open(STFile *s, const char *path, char *err, size_t errn) {
    memset(s, 0, sizeof(*s));
    snprintf(s->path, sizeof(s->path), "%s", path);
    s->f = fopen_regular(path, "rb", "a safetensors file", err, errn);
    if (!s->f) return 0;
    fseeko(s->f, 0, SEEK_END);
    uint64_t size = (uint64_t)ftello(s->f);
    fseeko(s->f, 0, SEEK_SET);
    uint8_t n8[8];
    if (size < 8 || fread(n8, 1, 8, s->f) != 8) ST_FAIL("%s: truncated file: %llu bytes, no 8-byte header length", path, (unsigned long long)size);
    uint64_t hn = 0;
    for (int i = 0; i < 8; i++) hn |= (uint64_t)n8[i] << (8 * i);
    if (!st_check_length(path, hn, size, err, errn)) { st_close(s); return 0; }
    char *text = (char *)xmalloc(hn + 1, "safetensors header");
    if (fread(text, 1, hn, s->f) != hn) { free(text); ST_FAIL("%s: read failed", path); }
    text[hn] = 0;
    int ok = st_parse_header(s, path, text, hn, size, err, errn);
    free(text);
    return ok;
}
#undef ST_FAIL

static const STTensor *st_find(const STFile *s, const char *name) {
    STTensor key;
    key.name = name;
    const STTensor *k = &key, **hit = (const STTensor **)bsearch(&k, s->by_name, s->n, sizeof(STTensor *), st_cmp_name);
    return hit ? *hit : NULL;
}

// the tensor's raw bytes, end - begin of them, into buf
static int st_read_raw(STFile *s, const STTensor *t, void *buf, char *err, size_t errn) {
    size_t nb = (size_t)(t->end - t->begin);
    if (fseeko(s->f, (off_t)(s->data_start + t->begin), SEEK_SET) != 0 || fread(buf, 1, nb, s->f) != nb) {
        snprintf(err, errn, "%s: tensor %s: read failed", s->path, t->name);
        return 0;
    }
    return 1;
}
