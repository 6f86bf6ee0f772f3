// checkpoint.h: the model file and training checkpoints, shared by both trainers.
//
// Model file (model.bin; also what --init reads and scripts/train_gpt.py
// exchanges): a 256-int32 header (docs/model.md) and every parameter in fp32,
// flat order. Each rank writes the slices of the master it holds (rank 0 all of it where every
// rank holds it whole), and reads back only the ranges its stage holds. --init also reads
// Hugging Face safetensors files (hf.h); export_model.c writes them.
//
// Checkpoint: a directory DIR/ckpt_SSSSSSSS holding
//   model.bin                 the full fp32 parameters (the master weights)
//   optim_rank_RRRRR.bin      AdamW m and v of partition R, as that run's plan laid them out
//   manifest.json             config, stage, world size, partitions, step, data position,
//                             sampling RNG, skipped steps and the fp16 loss scaler's state
//                             (step_guard.h), file sizes and CRC-32s
// It is written as DIR/.ckpt_SSSSSSSS.tmp and renamed into place only when every
// file is complete and synced, then DIR/latest names it (also by rename): a
// crash never leaves a half-written checkpoint where --resume would find it.
//
// Resume works at any world size and any stage: each rank recomputes from the
// manifest where the writer's partitions put each element (the plan is pure
// arithmetic, zero.h) and reads the pieces of its own partition.
#pragma once
#include "zero.h"
#include "step_guard.h"
#include "hf.h"
#include "dataloader.h"
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>
#include <fcntl.h>

#define MODEL_MAGIC 20251121
#define MODEL_VERSION 1
#define OPTIM_MAGIC 20251123

// ----------------------------------------------------------------------------
// CRC-32 (IEEE), for the manifest's file checksums

static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

// ----------------------------------------------------------------------------
// the model file

static void model_header(int32_t h[256], const ModelConfig *c, size_t num_params) {
    memset(h, 0, 256 * sizeof(int32_t));
    h[0] = MODEL_MAGIC; h[1] = MODEL_VERSION; h[2] = c->arch; h[3] = c->n_layer; h[4] = c->n_head;
    h[5] = c->n_kv_head; h[6] = c->d_model; h[7] = c->d_ff; h[8] = c->vocab_size; h[9] = c->padded_vocab;
    h[10] = c->max_seq;
    memcpy(&h[11], &c->norm_eps, 4); memcpy(&h[12], &c->rope_theta, 4);
    h[13] = 0;  // fp32
    h[14] = (int32_t)(uint32_t)(num_params & 0xFFFFFFFFu); h[15] = (int32_t)(uint32_t)(num_params >> 32);
}

// Reads a model file into flat (num_params floats), checking it describes the
// model this run builds. Returns 0 and sets err (one line) instead of exiting,
// so that under MPI every rank can agree on the failure first.
static int params_read_file(ParamSource *s, int u, size_t lo, size_t n, float *out) {
    size_t numel = s->L->units[u].numel, real = lo >= numel ? 0 : (lo + n < numel ? n : numel - lo);
    off_t at = 1024 + 4 * (off_t)(s->L->units[u].flat_offset + lo);
    for (size_t done = 0; done < real * 4;) {
        ssize_t got = pread(s->fd, (char *)out + done, real * 4 - done, at + (off_t)done);
        if (got <= 0) {
            snprintf(s->err, sizeof(s->err), "%s: read failed at byte %lld (%s)", s->path, (long long)(at + (off_t)done),
                     got < 0 ? strerror(errno) : "unexpected end of file");
            return 0;
        }
        done += (size_t)got;
    }
    memset(out + real, 0, (n - real) * sizeof(float));
    return 1;
}

// Opens a model file as a parameter source: zeroc's own (its header checked
// against the run's model; each rank then reads only its ranges) or a Hugging
// Face .safetensors file (hf.h: imported whole, then served from memory).
// Returns 1, or 0 with err.
static int params_from_file(ParamSource *s, const ModelLayout *L, const char *path, char *err, size_t errn) {
    const ModelConfig *c = &L->cfg;
    size_t num_params = L->num_params;
    *s = params_from_init(L, 0);
    snprintf(s->path, sizeof(s->path), "%s", path);
    if (st_sniff(path)) {
        s->owned = (float *)xmalloc(num_params * sizeof(float), "parameters (safetensors import)");
        if (!hf_import(path, c, num_params, s->owned, err, errn)) { free(s->owned); s->owned = NULL; return 0; }
        s->read = params_read_flat; s->flat = s->owned;
        return 1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errn, "%s: cannot open (%s)", path, strerror(errno)); return 0; }
    int32_t h[256], want[256];
    fseeko(f, 0, SEEK_END);
    long long size = ftello(f);
    fseeko(f, 0, SEEK_SET);
    if (size < 1024 || fread(h, 4, 256, f) != 256) { snprintf(err, errn, "%s: truncated file: no 1024-byte header", path); fclose(f); return 0; }
    model_header(want, c, num_params);
    static const char *FIELD[] = {"magic", "version", "arch", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff",
                                  "vocab_size", "padded_vocab", "max_seq", "norm_eps", "rope_theta", "dtype",
                                  "num_params", "num_params"};
    if (h[0] != MODEL_MAGIC) { snprintf(err, errn, "%s: bad magic number %d (expected %d): not a zeroc model file", path, h[0], MODEL_MAGIC); fclose(f); return 0; }
    for (int i = 1; i < 16; i++)
        if (h[i] != want[i]) {
            snprintf(err, errn, "%s: %s is %d in the file but %d for this run's model (check --arch/--preset/sizes)", path, FIELD[i], h[i], want[i]);
            fclose(f); return 0;
        }
    long long expect = 1024 + 4LL * (long long)num_params;
    if (size != expect) { snprintf(err, errn, "%s: %s file: %lld bytes, expected %lld", path, size < expect ? "truncated" : "oversized", size, expect); fclose(f); return 0; }
    s->fd = dup(fileno(f));
    fclose(f);
    if (s->fd < 0) { snprintf(err, errn, "%s: cannot open (%s)", path, strerror(errno)); return 0; }
    s->read = params_read_file;
    return 1;
}

static void params_close(ParamSource *s) {
    if (s->fd >= 0) close(s->fd);
    free(s->owned);
    s->fd = -1; s->owned = NULL;
}

// The whole model file into flat (tests; the exporter streams instead). Returns 1, or 0 with err.
static int model_file_read(const char *path, const ModelLayout *L, float *flat, char *err, size_t errn) {
    ParamSource s;
    if (!params_from_file(&s, L, path, err, errn)) return 0;
    int ok = params_read_all(&s, flat);
    if (!ok) snprintf(err, errn, "%s", s.err);
    params_close(&s);
    return ok;
}

// Collective: writes the model file without gathering the model anywhere.
// Rank 0 creates it (header, full size); then, where the fp32 master is
// partitioned, every rank writes its own slice of every unit at its place in
// the flat order, and where every rank holds the whole master, rank 0 writes it
// all, unit by unit. Every rank learns any rank's failure (the same one line).
static void model_file_write(Zero *z, const char *path) {
    const ZeroPlan *p = &z->plan;
    Comm *c = z->comm;
    char err[1300] = {0};
    int fd = -1;
    if (c->rank == 0) {
        int32_t h[256];
        model_header(h, &z->layout->cfg, p->num_params);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || pwrite(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || ftruncate(fd, 1024 + 4 * (off_t)p->num_params) != 0)
            snprintf(err, sizeof(err), "%s: write failed (%s)", path, strerror(errno));
    }
    if (!comm_agree(c, err[0] == 0, err, sizeof(err))) fatal("%s", err);
    int whole = zero_master_whole(z), writer = whole ? c->rank == 0 : 1;
    if (writer && fd < 0 && (fd = open(path, O_WRONLY)) < 0) snprintf(err, sizeof(err), "%s: cannot open (%s)", path, strerror(errno));
    float *buf = writer ? (float *)xmalloc((whole ? p->max_padded : p->max_shard) * sizeof(float), "model file buffer") : NULL;
    for (int i = 0; writer && !err[0] && i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t lo = whole ? 0 : (size_t)p->part * U->shard, n = whole ? U->numel : U->shard;
        if (lo >= U->numel) continue;                   // a slice of padding only
        if (lo + n > U->numel) n = U->numel - lo;
        zb_download(&z->be, buf, zero_master_slice(z, i) - ((size_t)p->part * U->shard - lo), n * sizeof(float));
        off_t at = 1024 + 4 * (off_t)(z->layout->units[i].flat_offset + lo);
        if (pwrite(fd, buf, n * 4, at) != (ssize_t)(n * 4)) snprintf(err, sizeof(err), "%s: write failed (%s)", path, strerror(errno));
    }
    if (fd >= 0 && !err[0] && fsync(fd) != 0) snprintf(err, sizeof(err), "%s: write failed (%s)", path, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && !err[0]) snprintf(err, sizeof(err), "%s: write failed (%s)", path, strerror(errno));
    free(buf);
    if (!comm_agree(c, err[0] == 0, err, sizeof(err))) fatal("%s", err);
}

// ----------------------------------------------------------------------------
// checkpoints

typedef struct {
    int step;               // optimizer steps completed (applied or skipped)
    DataState data;         // train loader position and shuffle state (dataloader.h)
    uint64_t rng;           // sampling RNG state
    StepGuard guard;        // skipped steps, the fp16 loss scaler (step_guard.h)
} TrainState;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}
static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static uint32_t file_crc(const char *path, long long *size) {
    FILE *f = fopen_or_die(path, "rb");
    char buf[1 << 16];
    uint32_t crc = 0;
    size_t n;
    *size = 0;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) { crc = crc32_update(crc, buf, n); *size += n; }
    fclose(f);
    return crc;
}

static void write_text_atomic(const char *path, const char *text) {
    AtomicFile a = atomic_open(path);
    fwrite_or_die(text, 1, strlen(text), a.f, a.tmp);
    atomic_commit(&a);
}

static void checkpoint_save(Zero *z, const char *dir, const TrainState *st, const TrainConfig *tc) {
    Comm *c = z->comm;
    const ZeroPlan *p = &z->plan;
    char name[64], tmp[1024], final_dir[1024], path[1100];
    snprintf(name, sizeof(name), "ckpt_%08d", st->step);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(final_dir, sizeof(final_dir), "%s/%s", dir, name);
    if (c->rank == 0) {
        mkdir(dir, 0755);
        rm_tree(tmp);
        if (mkdir(tmp, 0755) != 0) fatal("%s: cannot create checkpoint directory (%s)", tmp, strerror(errno));
    }
    comm_barrier(c);
    snprintf(path, sizeof(path), "%s/model.bin", tmp);
    model_file_write(z, path);
    // optimizer partitions: in stage 0 every rank holds the same full state, rank 0 writes it
    if (p->P > 1 || c->rank == 0) {
        snprintf(path, sizeof(path), "%s/optim_rank_%05d.bin", tmp, p->part);
        FILE *f = fopen_or_die(path, "wb");
        int32_t h[256] = {0};
        h[0] = OPTIM_MAGIC; h[1] = 1; h[2] = p->P; h[3] = p->part; h[4] = p->n_units; h[5] = ZERO_ALIGN;
        h[6] = (int32_t)(p->shard_elems & 0xFFFFFFFFu); h[7] = (int32_t)(p->shard_elems >> 32);
        fwrite_or_die(h, 4, 256, f, path);
        // m, then v, a piece at a time (no copy of the whole partition)
        size_t piece = p->max_shard;
        float *buf = (float *)xmalloc(piece * 4, "optimizer state");
        for (int which = 0; which < 2; which++)
            for (size_t off = 0; off < p->shard_elems; off += piece) {
                size_t n = p->shard_elems - off < piece ? p->shard_elems - off : piece;
                zero_optim_read(z, which, off, n, buf);
                fwrite_or_die(buf, 4, n, f, path);
            }
        free(buf);
        fflush(f); fsync(fileno(f));
        if (fclose(f) != 0) fatal("%s: write failed", path);
    }
    comm_barrier(c);
    if (c->rank == 0) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddNumberToObject(m, "format", 1);
        cJSON_AddNumberToObject(m, "step", st->step);
        data_state_write(m, &st->data);
        char rng[32];
        snprintf(rng, sizeof(rng), "%016llx", (unsigned long long)st->rng);
        cJSON_AddStringToObject(m, "rng", rng);
        step_guard_to_json(&st->guard, m);
        cJSON_AddNumberToObject(m, "zero_stage", ZERO_STAGE);
        cJSON_AddNumberToObject(m, "world", c->world);
        cJSON_AddNumberToObject(m, "partitions", p->P);
        cJSON_AddNumberToObject(m, "align", ZERO_ALIGN);
        cJSON_AddNumberToObject(m, "num_params", (double)p->num_params);
        cJSON *mc = cJSON_AddObjectToObject(m, "model");
        const ModelConfig *mcfg = &z->layout->cfg;
        cJSON_AddStringToObject(mc, "arch", arch_name(mcfg->arch));
        cJSON_AddNumberToObject(mc, "n_layer", mcfg->n_layer);
        cJSON_AddNumberToObject(mc, "n_head", mcfg->n_head);
        cJSON_AddNumberToObject(mc, "n_kv_head", mcfg->n_kv_head);
        cJSON_AddNumberToObject(mc, "d_model", mcfg->d_model);
        cJSON_AddNumberToObject(mc, "d_ff", mcfg->d_ff);
        cJSON_AddNumberToObject(mc, "vocab_size", mcfg->vocab_size);
        cJSON_AddNumberToObject(mc, "max_seq", mcfg->max_seq);
        cJSON *tr = cJSON_AddObjectToObject(m, "train");
        cJSON_AddNumberToObject(tr, "batch", tc->B);
        cJSON_AddNumberToObject(tr, "seq", tc->T);
        cJSON_AddNumberToObject(tr, "accum", tc->accum);
        cJSON_AddNumberToObject(tr, "total_batch", tc->total_batch);
        cJSON_AddNumberToObject(tr, "lr", tc->lr);
        cJSON_AddStringToObject(tr, "train", tc->train_path);
        cJSON *files = cJSON_AddArrayToObject(m, "files");
        for (int r = -1; r < p->P; r++) {
            char fn[64];
            if (r < 0) snprintf(fn, sizeof(fn), "model.bin");
            else snprintf(fn, sizeof(fn), "optim_rank_%05d.bin", r);
            snprintf(path, sizeof(path), "%s/%s", tmp, fn);
            long long size;
            uint32_t crc = file_crc(path, &size);
            cJSON *fe = cJSON_CreateObject();
            cJSON_AddStringToObject(fe, "name", fn);
            cJSON_AddNumberToObject(fe, "bytes", (double)size);
            char crcs[16];
            snprintf(crcs, sizeof(crcs), "%08x", crc);
            cJSON_AddStringToObject(fe, "crc32", crcs);
            cJSON_AddItemToArray(files, fe);
        }
        char *text = cJSON_Print(m);
        snprintf(path, sizeof(path), "%s/manifest.json", tmp);
        write_text_atomic(path, text);
        free(text);
        cJSON_Delete(m);
        // into place: the complete directory appears at once
        char old[1100];
        snprintf(old, sizeof(old), "%s/.%s.old", dir, name);
        rm_tree(old);
        struct stat sb;
        if (stat(final_dir, &sb) == 0 && rename(final_dir, old) != 0) fatal("%s: cannot replace (%s)", final_dir, strerror(errno));
        if (rename(tmp, final_dir) != 0) fatal("%s: cannot rename into place (%s)", final_dir, strerror(errno));
        rm_tree(old);
        snprintf(path, sizeof(path), "%s/latest", dir);
        char line[80];
        snprintf(line, sizeof(line), "%s\n", name);
        write_text_atomic(path, line);
    }
    comm_barrier(c);
}

// The checkpoint directory --resume names: DIR itself if it holds a manifest,
// else the one DIR/latest names.
static int checkpoint_resolve(const char *dir, char *out, size_t n, char *err, size_t errn) {
    char path[1100];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    if (stat(path, &sb) == 0) { snprintf(out, n, "%s", dir); return 1; }
    snprintf(path, sizeof(path), "%s/latest", dir);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errn, "%s: no checkpoint here (neither manifest.json nor latest)", dir); return 0; }
    char name[256] = {0};
    if (!fgets(name, sizeof(name), f)) name[0] = 0;
    fclose(f);
    name[strcspn(name, "\r\n")] = 0;
    if (!name[0] || strchr(name, '/')) { snprintf(err, errn, "%s: malformed", path); return 0; }
    snprintf(out, n, "%s/%s", dir, name);
    return 1;
}

#define CK_FAIL(...) do { snprintf(err, errn, __VA_ARGS__); return 0; } while (0)

// the whole of a small file, NUL-terminated, or NULL with err set
static char *read_text_file(const char *path, char *err, size_t errn) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errn, "%s: cannot open (%s)", path, strerror(errno)); return NULL; }
    fseeko(f, 0, SEEK_END);
    long long n = ftello(f);
    fseeko(f, 0, SEEK_SET);
    if (n < 0 || n > (1 << 24)) { fclose(f); snprintf(err, errn, "%s: not a manifest (size %lld)", path, n); return NULL; }
    char *text = (char *)xmalloc(n + 1, "manifest");
    size_t got = fread(text, 1, n, f);
    fclose(f);
    if (got != (size_t)n) { free(text); snprintf(err, errn, "%s: read failed", path); return NULL; }
    text[n] = 0;
    return text;
}

static int checkpoint_load_manifest(Zero *z, const char *ck, cJSON *m, TrainState *st, char *err, size_t errn);

// Loads parameters, optimizer state and the train state. Returns 1, or 0 with
// a one-line err.
static int checkpoint_load_local(Zero *z, const char *dir, TrainState *st, char *err, size_t errn) {
    char ck[1024], path[1200];
    if (!checkpoint_resolve(dir, ck, sizeof(ck), err, errn)) return 0;
    snprintf(path, sizeof(path), "%s/manifest.json", ck);
    char *text = read_text_file(path, err, errn);
    if (!text) return 0;
    cJSON *m = cJSON_Parse(text);
    free(text);
    if (!m) CK_FAIL("%s: not valid JSON", path);
    int ok = checkpoint_load_manifest(z, ck, m, st, err, errn);
    cJSON_Delete(m);
    return ok;
}

// Entry i of a manifest's "files": the file must exist with the recorded size and CRC-32.
static int checkpoint_check_file(const char *ck, cJSON *fe, int i, char *err, size_t errn) {
    cJSON *fn = cJSON_GetObjectItem(fe, "name"), *fb = cJSON_GetObjectItem(fe, "bytes"), *fc = cJSON_GetObjectItem(fe, "crc32");
    if (!cJSON_IsString(fn) || !cJSON_IsNumber(fb) || !cJSON_IsString(fc) || strchr(fn->valuestring, '/'))
        CK_FAIL("%s/manifest.json: malformed file entry %d", ck, i);
    char fp[1300];
    snprintf(fp, sizeof(fp), "%s/%s", ck, fn->valuestring);
    struct stat sb;
    if (stat(fp, &sb) != 0) CK_FAIL("%s: missing (%s)", fp, strerror(errno));
    if ((double)sb.st_size != fb->valuedouble) CK_FAIL("%s: %lld bytes, the manifest says %.0f (truncated or altered)", fp, (long long)sb.st_size, fb->valuedouble);
    long long sz;
    char crcs[16];
    snprintf(crcs, sizeof(crcs), "%08x", file_crc(fp, &sz));
    if (strcmp(crcs, fc->valuestring) != 0) CK_FAIL("%s: CRC-32 %s does not match the manifest's %s (corrupted)", fp, crcs, fc->valuestring);
    return 1;
}

static int checkpoint_load_manifest(Zero *z, const char *ck, cJSON *m, TrainState *st, char *err, size_t errn) {
    const ZeroPlan *p = &z->plan;
    char path[1200];
    snprintf(path, sizeof(path), "%s/manifest.json", ck);
    cJSON *j_step = cJSON_GetObjectItem(m, "step"), *j_rng = cJSON_GetObjectItem(m, "rng");
    cJSON *j_P = cJSON_GetObjectItem(m, "partitions"), *j_np = cJSON_GetObjectItem(m, "num_params"), *j_al = cJSON_GetObjectItem(m, "align");
    cJSON *files = cJSON_GetObjectItem(m, "files");
    if (!cJSON_IsNumber(j_step) || !cJSON_IsString(j_rng) || !cJSON_IsNumber(j_P) ||
        !cJSON_IsNumber(j_np) || !cJSON_IsNumber(j_al) || !cJSON_IsArray(files))
        CK_FAIL("%s: missing or malformed fields", path);
    if (!data_state_read(m, &st->data, path, err, errn)) return 0;
    if ((size_t)j_np->valuedouble != p->num_params)
        CK_FAIL("%s: checkpoint has %.0f parameters, this run's model has %zu", path, j_np->valuedouble, p->num_params);
    if (j_al->valueint != ZERO_ALIGN) CK_FAIL("%s: alignment %d differs from this build's %d", path, j_al->valueint, ZERO_ALIGN);
    int Pw = j_P->valueint;
    if (Pw < 1 || cJSON_GetArraySize(files) != Pw + 1) CK_FAIL("%s: expected %d files for %d partitions", path, Pw + 1, Pw);
    // every file must be whole: size and CRC as the manifest recorded them
    for (int i = 0; i <= Pw; i++)
        if (!checkpoint_check_file(ck, cJSON_GetArrayItem(files, i), i, err, errn)) return 0;
    // parameters: each rank reads the ranges its stage holds
    snprintf(path, sizeof(path), "%s/model.bin", ck);
    ParamSource src;
    if (!params_from_file(&src, z->layout, path, err, errn)) return 0;
    int loaded = zero_load_params(z, &src);
    if (!loaded) snprintf(err, errn, "%s", src.err);
    params_close(&src);
    if (!loaded) return 0;
    // optimizer state: the writer had Pw partitions, with their own padding
    // (a piece at a time: each run of this rank's slice that one writer partition holds)
    float *piece = (float *)xmalloc(p->max_shard * 4, "optimizer state");
    size_t *w_shard_off = (size_t *)xcalloc(sizeof(size_t) * (p->n_units + 1), "reshard plan");
    for (int i = 0; i < p->n_units; i++) w_shard_off[i + 1] = w_shard_off[i] + zero_padded(p->u[i].numel, Pw) / Pw;
    size_t w_shard_elems = w_shard_off[p->n_units];
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t w_shard = zero_padded(U->numel, Pw) / Pw;
        size_t lo = (size_t)p->part * U->shard, hi = lo + U->shard;
        if (hi > U->numel) hi = U->numel;
        for (size_t a = lo; a < hi;) {
            int wp = (int)(a / w_shard);
            size_t b = ((size_t)wp + 1) * w_shard;
            if (b > hi) b = hi;
            snprintf(path, sizeof(path), "%s/optim_rank_%05d.bin", ck, wp);
            FILE *of = fopen(path, "rb");
            if (!of) { free(w_shard_off); free(piece); CK_FAIL("%s: cannot open (%s)", path, strerror(errno)); }
            int32_t h[256];
            int ok = fread(h, 4, 256, of) == 256 && h[0] == OPTIM_MAGIC && h[2] == Pw && h[3] == wp &&
                     ((size_t)(uint32_t)h[6] | ((size_t)(uint32_t)h[7] << 32)) == w_shard_elems;
            size_t src = w_shard_off[i] + (a - (size_t)wp * w_shard), dst = U->shard_off + (a - lo);
            for (int which = 0; which < 2 && ok; which++) {
                ok = fseeko(of, 1024 + 4 * (off_t)(which * w_shard_elems + src), SEEK_SET) == 0 && fread(piece, 4, b - a, of) == b - a;
                if (ok) zero_optim_write(z, which, dst, b - a, piece);
            }
            fclose(of);
            if (!ok) { free(w_shard_off); free(piece); CK_FAIL("%s: bad header or short read", path); }
            a = b;
        }
    }
    free(w_shard_off);
    free(piece);
    st->step = j_step->valueint;
    st->rng = strtoull(j_rng->valuestring, NULL, 16);
    snprintf(path, sizeof(path), "%s/manifest.json", ck);
    return step_guard_from_json(&st->guard, m, path, err, errn);
}
#undef CK_FAIL

// Collective: every rank loads; if any rank fails, every rank stops with the
// same one line (the failing rank's), so none is left waiting in a collective.
static void checkpoint_load(Zero *z, const char *dir, TrainState *st) {
    char err[1400] = {0};
    int ok = checkpoint_load_local(z, dir, st, err, sizeof(err));
    if (!comm_agree(z->comm, ok, err, sizeof(err))) fatal("%s", err);
}
