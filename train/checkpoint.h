// train/checkpoint.h: the model file and training checkpoints, shared by both trainers.
//
// The model file, model.bin, is also what --init reads and scripts/train_gpt.py
// exchanges: a 256-int32 header (docs/model.md), then every parameter in fp32, in
// flat order. Each rank writes the slices of the master it holds; where every rank
// holds it whole, rank 0 writes it all. Each rank reads back only the ranges its
// stage holds. --init also reads Hugging Face safetensors files (model/hf.h), which
// tools/export_model.c writes.
//
// Checkpoint: a directory DIR/ckpt_SSSSSSSS holding
//   model.bin                 the full fp32 parameters (the master weights)
//   optim_rank_RRRRR.bin      AdamW m and v of partition R, as that run's plan laid them out
//   manifest.json             config, stage, world size, partitions, step, data position and
//                             shuffle state, sampling RNG, skipped steps and the fp16 loss
//                             scaler's state (train/step_guard.h), file sizes and CRC-32s
// It is written as DIR/.ckpt_SSSSSSSS.tmp and renamed into place only when every
// file is complete and synced; then DIR/latest names it, also by a rename. So a
// crash never leaves a half-written checkpoint where --resume would find it.
// Every write is checked (util/common.h's OutFile). A save that fails on any rank
// removes its temporary files, leaves the previous checkpoints and DIR/latest as
// they were, and stops every rank with the failing rank's one line.
// --resume DIR takes the newest checkpoint that verifies: the one DIR/latest names,
// else the next older ckpt_ directory. It says which it skipped and why.
// --keep-last K removes older checkpoints once a newer one is complete.
// The formats (manifest, optimizer shard header) are in train/checkpoint_format.h.
//
// Resume works at any world size and any stage. The plan is pure arithmetic
// (zero.h), so each rank recomputes from the manifest where the writer's
// partitions put each element, and reads the pieces of its own partition.
#pragma once
#include "zero.h"
#include "zero/load.h"
#include "model/hf.h"
#include "train/checkpoint_format.h"
#include "dataloader.h"
#include "train/step_guard.h"
#include "config/flags.h"
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>
#include <fcntl.h>
#include <dirent.h>

// paths and messages are cut at their buffers' sizes by design (snprintf)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define MODEL_MAGIC 20251121
#define MODEL_VERSION 1

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

// The model a zeroc model file's header describes (with its parameter count). Returns 1,
// or 0 with a one-line err.
static int model_file_config(const char *path, ModelConfig *m, long long *num_params, char *err, size_t errn) {
    FILE *f = fopen_regular(path, "rb", "a model file", err, errn);
    if (!f) return 0;
    int32_t h[256];
    int got = fread(h, 4, 256, f) == 256;
    fclose(f);
    if (!got) { snprintf(err, errn, "%s: truncated file: no 1024-byte header", path); return 0; }
    if (h[0] != MODEL_MAGIC) { snprintf(err, errn, "%s: bad magic number %d (expected %d): not a zeroc model file", path, h[0], MODEL_MAGIC); return 0; }
    if (h[1] != MODEL_VERSION) { snprintf(err, errn, "%s: model file version %d (this build reads %d)", path, h[1], MODEL_VERSION); return 0; }
    if (h[13] != 0) { snprintf(err, errn, "%s: dtype %d (zeroc model files are fp32: 0)", path, h[13]); return 0; }
    memset(m, 0, sizeof(*m));
    m->arch = h[2]; m->n_layer = h[3]; m->n_head = h[4]; m->n_kv_head = h[5]; m->d_model = h[6]; m->d_ff = h[7];
    m->vocab_size = h[8]; m->padded_vocab = h[9]; m->max_seq = h[10];
    memcpy(&m->norm_eps, &h[11], 4); memcpy(&m->rope_theta, &h[12], 4);
    *num_params = (long long)((uint64_t)(uint32_t)h[14] | (uint64_t)(uint32_t)h[15] << 32);
    int ok = (m->arch == ARCH_GPT2 || m->arch == ARCH_LLAMA) && m->n_layer >= 1 && m->n_head >= 1 && m->n_kv_head >= 1 &&
             m->d_model >= 1 && m->d_ff >= 1 && m->vocab_size >= 2 && m->padded_vocab == (int)round_up(m->vocab_size, 128) &&
             m->max_seq >= 1 && *num_params >= 1;
    if (!ok) snprintf(err, errn, "%s: the header's model is not a valid one (a damaged file)", path);
    return ok;
}

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
    return params_check_finite(s->L, u, lo, out, real, s->path, s->err, sizeof(s->err));
}

static int params_read_safetensors(ParamSource *s, int u, size_t lo, size_t n, float *out) {
    return hf_source_read((HFSource *)s->hf, u, lo, n, out, s->err, sizeof(s->err));
}

// --init names a file; a directory gets the file in it that was meant, as transformers'
// from_pretrained and --resume take directories. Returns 1 with err when path is a directory.
static int init_path_is_dir(const char *path, char *err, size_t errn) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
    char st[1100], bin[1100], latest[1100];
    snprintf(st, sizeof(st), "%s/model.safetensors", path);
    snprintf(bin, sizeof(bin), "%s/model.bin", path);
    snprintf(latest, sizeof(latest), "%s/latest", path);
    int ckpt = access(latest, R_OK) == 0;   // a --save directory
    if (access(st, R_OK) == 0) snprintf(err, errn, "%s: a directory, not a model file: --init takes the file, %s", path, st);
    else if (access(bin, R_OK) == 0)
        snprintf(err, errn, "%s: a directory, not a model file: --resume %s continues its run; --init %s starts a new run "
                 "from its weights", path, path, bin);
    else if (ckpt)
        snprintf(err, errn, "%s: a directory, not a model file: --resume %s continues its run; --init takes a checkpoint's "
                 "model.bin (%s/ckpt_N/model.bin) to start a new run from its weights", path, path, path);
    else snprintf(err, errn, "%s: a directory, not a model file: --init takes a model.bin or a .safetensors file", path);
    return 1;
}

// Opens a model file as a parameter source: zeroc's own, whose header must match the
// run's model, or a Hugging Face .safetensors file, which model/hf.h checks from its
// header and converts a tensor at a time. Either way each rank then reads only its
// ranges. Returns 1, or 0 with err.
static int params_from_file(ParamSource *s, const ModelLayout *L, const char *path, char *err, size_t errn) {
    const ModelConfig *c = &L->cfg;
    size_t num_params = L->num_params;
    *s = params_from_init(L, 0);
    snprintf(s->path, sizeof(s->path), "%s", path);
    if (init_path_is_dir(path, err, errn)) return 0;
    if (st_sniff(path)) {
        HFSource *h = (HFSource *)xmalloc(sizeof(HFSource), "safetensors source");
        if (!hf_source_open(h, path, c, err, errn)) { free(h); return 0; }
        s->hf = h;
        s->read = params_read_safetensors;
        return 1;
    }
    ModelConfig fm;
    long long file_params;
    if (!model_file_config(path, &fm, &file_params, err, errn)) return 0;
    // the run took its model from this file (config_from_run_files), unless a fall-back checkpoint holds another
    if (fm.arch != c->arch) { snprintf(err, errn, "%s: the file's model is %s, this run's %s", path, arch_name(fm.arch), arch_name(c->arch)); return 0; }
#define MF_FIELD(name, a, b) {name, (double)(a), (double)(b)}
    struct { const char *name; double file, run; } chk[] = {
        MF_FIELD("layers", fm.n_layer, c->n_layer), MF_FIELD("heads", fm.n_head, c->n_head),
        MF_FIELD("key/value heads", fm.n_kv_head, c->n_kv_head), MF_FIELD("width", fm.d_model, c->d_model),
        MF_FIELD("MLP width", fm.d_ff, c->d_ff), MF_FIELD("vocabulary", fm.vocab_size, c->vocab_size),
        MF_FIELD("maximum sequence length", fm.max_seq, c->max_seq), MF_FIELD("norm epsilon", fm.norm_eps, c->norm_eps),
        MF_FIELD("RoPE base", fm.rope_theta, c->rope_theta), MF_FIELD("parameters", file_params, num_params)};
#undef MF_FIELD
    for (size_t i = 0; i < sizeof(chk) / sizeof(chk[0]); i++)
        if (chk[i].file != chk[i].run) {
            snprintf(err, errn, "%s: the file's model has %s %.9g, this run's %.9g", path, chk[i].name, chk[i].file, chk[i].run);
            return 0;
        }
    FILE *f = fopen_regular(path, "rb", "a model file", err, errn);
    if (!f) return 0;
    fseeko(f, 0, SEEK_END);
    long long size = ftello(f);
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
    if (s->hf) { hf_source_close((HFSource *)s->hf); free(s->hf); }
    s->fd = -1; s->hf = NULL;
}

// The whole model file into flat, for tests; the exporter streams instead. Returns 1, or 0 with err.
static int model_file_read(const char *path, const ModelLayout *L, float *flat, char *err, size_t errn) {
    ParamSource s;
    if (!params_from_file(&s, L, path, err, errn)) return 0;
    int ok = params_read_all(&s, flat);
    if (!ok) snprintf(err, errn, "%s", s.err);
    params_close(&s);
    return ok;
}

// Collective: writes the model file without gathering the model anywhere. Rank 0
// creates it with its header at its full size. Where the fp32 master is
// partitioned, every rank then writes its own slice of every unit at its place in
// the flat order; where every rank holds the whole master, rank 0 writes it all,
// unit by unit. Returns 1, or 0 with a one-line err. Every rank makes the same
// calls either way, and the caller agrees on the outcome with the other ranks.
static int model_file_write(Zero *z, const char *path, char *err, size_t errn) {
    const ZeroPlan *p = &z->plan;
    Comm *c = z->comm;
    int ok = 1;
    if (c->rank == 0) {
        OutFile f;
        int32_t h[256];
        model_header(h, &z->layout->cfg, p->num_params);
        if (out_open(&f, path, 0) && out_write(&f, h, sizeof(h))) out_set_size(&f, 1024 + 4 * (off_t)p->num_params);
        if (!out_finish(&f)) { snprintf(err, errn, "%s", f.err); ok = 0; }
    }
    if (!comm_agree(c, ok, err, errn)) return 0;
    int whole = zero_master_whole(z);
    if (whole && c->rank != 0) return 1;
    OutFile f;
    out_open_existing(&f, path);
    float *buf = (float *)xmalloc((whole ? p->max_padded : p->max_shard) * sizeof(float), "model file buffer");
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t lo = whole ? 0 : (size_t)p->part * U->shard, n = whole ? U->numel : U->shard;
        if (lo >= U->numel) continue;                   // a slice of padding only
        if (lo + n > U->numel) n = U->numel - lo;
        zero_master_read(z, i, lo, n, buf);   // from the NVMe files when the master lives there
        out_seek(&f, 1024 + 4 * (off_t)(z->layout->units[i].flat_offset + lo));
        out_write(&f, buf, n * 4);
    }
    free(buf);
    if (!out_finish(&f)) { snprintf(err, errn, "%s", f.err); return 0; }
    return 1;
}

// ----------------------------------------------------------------------------
// checkpoints

typedef struct {
    int step;               // optimizer steps completed (applied or skipped)
    DataState data;         // train loader position and shuffle state (dataloader.h)
    uint64_t rng;           // sampling RNG state
    StepGuard guard;        // skipped steps, the fp16 loss scaler (train/step_guard.h)
    long long data_tokens;  // the train data the position points into: its token count
    uint32_t data_crc;      // and its fingerprint (dataloader_fingerprint)
} TrainState;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}
static void rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

// size and CRC-32 of a file. Returns 1, or 0 with a one-line err.
static int file_crc(const char *path, long long *size, uint32_t *crc, char *err, size_t errn) {
    FILE *f = fopen_regular(path, "rb", "a checkpoint file", err, errn);
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n;
    *crc = 0;
    *size = 0;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) { *crc = crc32_update(*crc, buf, n); *size += n; }
    int bad = ferror(f);
    fclose(f);
    if (bad) { snprintf(err, errn, "%s: read failed", path); return 0; }
    return 1;
}

// "ckpt_00000012" -> 12, "ckpt_123456789" -> 123456789 (the name ckpt_%08d gives a step: eight digits
// or more); -1 for any other name
static int ckpt_step_of(const char *name) {
    if (strncmp(name, "ckpt_", 5) != 0) return -1;
    size_t digits = strlen(name) - 5;
    if (digits < 8 || digits > 10 || strspn(name + 5, "0123456789") != digits) return -1;
    long long step = atoll(name + 5);
    char again[32];
    snprintf(again, sizeof(again), "ckpt_%08lld", step);
    return step <= INT32_MAX && !strcmp(again, name) ? (int)step : -1;
}

static int cmp_int_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

// The steps of the checkpoint directories in dir, newest first; returns how many (at most max).
static int checkpoint_list(const char *dir, int *steps, int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 64;
    int *all = (int *)xmalloc(cap * sizeof(int), "checkpoint list");
    for (struct dirent *e; (e = readdir(d));) {
        int s = ckpt_step_of(e->d_name);
        if (s < 0) continue;
        if (n == cap) { int *b = (int *)xmalloc(2 * cap * sizeof(int), "checkpoint list"); memcpy(b, all, n * sizeof(int)); free(all); all = b; cap *= 2; }
        all[n++] = s;
    }
    closedir(d);
    qsort(all, n, sizeof(int), cmp_int_desc);
    if (n > max) n = max;
    memcpy(steps, all, n * sizeof(int));
    free(all);
    return n;
}

// The checkpoint name DIR/latest holds, or "" when there is none or it is not a plain name.
// Returns 0 with err when latest exists but cannot be read (a FIFO: refused, never waited on).
static int checkpoint_latest_read(const char *dir, char *name, size_t n, char *err, size_t errn) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/latest", dir);
    name[0] = 0;
    FILE *f = fopen_regular(path, "rb", "a checkpoint name (a regular file)", err, errn);
    if (!f) return errno == ENOENT;
    if (!fgets(name, (int)n, f)) name[0] = 0;
    fclose(f);
    name[strcspn(name, "\r\n")] = 0;
    if (strchr(name, '/')) name[0] = 0;
    return 1;
}
// the name alone, "" also when latest cannot be read
static void checkpoint_latest_name(const char *dir, char *name, size_t n) {
    char ignored[1400];
    checkpoint_latest_read(dir, name, n, ignored, sizeof(ignored));
}

// --keep-last K: rank 0, after a complete save of step `saved`, removes all but the newest
// K checkpoints, but never the one just saved nor the one latest names
static void checkpoint_prune(const char *dir, int keep, int saved, int say) {
    int steps[4096];
    int n = checkpoint_list(dir, steps, 4096);
    char latest[256];
    checkpoint_latest_name(dir, latest, sizeof(latest));
    for (int i = keep; i < n; i++) {
        char path[1100];
        snprintf(path, sizeof(path), "%s/ckpt_%08d", dir, steps[i]);
        if (steps[i] == saved || !strcmp(path_base(path), latest)) continue;
        rm_tree(path);
        if (say) printf("removed %s (--keep-last %d)\n", path, keep);
    }
}

// Rank 0, before a run's first save into dir, the run starting at step `start`: the
// checkpoints of dir past that step belong to a run this one does not continue (it
// resumed from an older checkpoint, or starts anew where another run saved). Left
// there, --keep-last would prune by step in this run's place and a later --resume
// would take them; so they move to dir/abandoned_SSSSSSSS (the step this run starts
// from; _2, _3, ... when taken), and latest, if it named one of them, names the newest
// checkpoint left (or goes). Returns 1 with a note when something moved, or 0 with err.
static int checkpoint_set_aside(const char *dir, int start, char *note, size_t noten, char *err, size_t errn) {
    int steps[4096];
    int n = checkpoint_list(dir, steps, 4096), newer = 0;
    while (newer < n && steps[newer] > start) newer++;   // newest first
    if (newer == 0) return 1;
    char aside[1100], from[1100], to[1200], latest[256];
    snprintf(aside, sizeof(aside), "%s/abandoned_%08d", dir, start);
    for (int k = 2; mkdir(aside, 0755) != 0; k++) {
        if (errno != EEXIST || k > 1000) { snprintf(err, errn, "%s: cannot create (%s)", aside, strerror(errno)); return 0; }
        snprintf(aside, sizeof(aside), "%s/abandoned_%08d_%d", dir, start, k);
    }
    if (!checkpoint_latest_read(dir, latest, sizeof(latest), err, errn)) return 0;
    int latest_moved = 0;
    char names[160] = "";
    for (int i = newer - 1; i >= 0; i--) {   // oldest first, for the note
        snprintf(from, sizeof(from), "%s/ckpt_%08d", dir, steps[i]);
        snprintf(to, sizeof(to), "%s/ckpt_%08d", aside, steps[i]);
        if (rename(from, to) != 0) { snprintf(err, errn, "%s: cannot move it to %s (%s)", from, aside, strerror(errno)); return 0; }
        latest_moved |= !strcmp(path_base(from), latest);
        size_t k = strlen(names);
        if (k < 100) snprintf(names + k, sizeof(names) - k, "%s%s", k ? ", " : "", path_base(from));
        else if (!strstr(names, "...")) snprintf(names + k, sizeof(names) - k, ", ...");
    }
    if (latest_moved) {   // latest names the newest checkpoint left, or goes
        char path[1100], line[64];
        snprintf(path, sizeof(path), "%s/latest", dir);
        int left = checkpoint_list(dir, steps, 1);
        OutFile lf;
        int ok = 1;
        if (left) {
            snprintf(line, sizeof(line), "ckpt_%08d\n", steps[0]);
            if (out_open(&lf, path, 1)) out_write(&lf, line, strlen(line));
            ok = out_commit(&lf);
        } else if (unlink(path) != 0 || !fsync_parent_dir(path, lf.err, sizeof(lf.err))) {
            ok = 0;
            if (!lf.err[0]) snprintf(lf.err, sizeof(lf.err), "%s: cannot remove (%s)", path, strerror(errno));
        }
        if (!ok) { snprintf(err, errn, "%s", lf.err); return 0; }
    }
    if (!fsync_parent_dir(to, err, errn) || !fsync_parent_dir(aside, err, errn)) return 0;
    snprintf(note, noten, "%s: set aside %s, newer than step %d this run starts from, in %s: the checkpoint%s of a run this one "
             "does not continue (--resume %s goes back to it)", dir, names, start, aside, newer > 1 ? "s" : "", aside);
    return 1;
}

// ----------------------------------------------------------------------------
// saving

// Rank 0, once every file of the checkpoint is written and synced in tmp: the
// manifest, then DIR/latest written and synced beside the old one, then the
// directory and latest renamed into place. A failure before latest's rename undoes
// what was moved, so the previous checkpoint and latest stay as they were. After it,
// only syncing DIR can fail: then the new checkpoint and latest stay in place (both
// complete) and *published says so. Returns 1, or 0 with err.
static int checkpoint_publish(Zero *z, const char *dir, const char *name, const char *tmp, const TrainState *st,
                              const TrainConfig *tc, int *published, char *err, size_t errn) {
    const ZeroPlan *p = &z->plan;
    char path[1100], final_dir[1100], old[1100], latest[1100];
    Manifest m = {0};
    m.format = MANIFEST_FORMAT; m.step = st->step; m.rng = st->rng;
    m.zero_stage = ZERO_STAGE; m.world = z->comm->world; m.partitions = p->P; m.align = ZERO_ALIGN;
    m.num_params = (long long)p->num_params; m.train_tokens = st->data_tokens; m.train_crc = st->data_crc;
    m.n_files = p->P + 1;
    m.files = (ManifestFile *)xcalloc(sizeof(ManifestFile) * m.n_files, "manifest files");
    for (int i = 0; i < m.n_files; i++) {
        if (i == 0) snprintf(m.files[i].name, sizeof(m.files[i].name), "model.bin");
        else snprintf(m.files[i].name, sizeof(m.files[i].name), "optim_rank_%05d.bin", i - 1);
        snprintf(path, sizeof(path), "%s/%s", tmp, m.files[i].name);
        if (!file_crc(path, &m.files[i].bytes, &m.files[i].crc, err, errn)) { manifest_free(&m); return 0; }
    }
    cJSON *sections = cJSON_CreateObject();
    data_state_write(sections, &st->data);
    step_guard_to_json(&st->guard, sections);
    char *text = manifest_text(&m, &z->layout->cfg, tc, sections);
    cJSON_Delete(sections);
    manifest_free(&m);
    OutFile mf, lf;
    snprintf(path, sizeof(path), "%s/manifest.json", tmp);
    if (out_open(&mf, path, 1)) out_write(&mf, text, strlen(text));
    free(text);
    if (!out_commit(&mf)) { snprintf(err, errn, "%s", mf.err); return 0; }
    // latest: written and synced as latest.tmp before anything becomes visible
    snprintf(latest, sizeof(latest), "%s/latest", dir);
    char line[80];
    snprintf(line, sizeof(line), "%s\n", name);
    if (out_open(&lf, latest, 1)) out_write(&lf, line, strlen(line));
    if (!out_finish(&lf)) { snprintf(err, errn, "%s", lf.err); return 0; }
    // into place: the complete directory appears at once; a checkpoint of the same step is moved aside first
    snprintf(final_dir, sizeof(final_dir), "%s/%s", dir, name);
    snprintf(old, sizeof(old), "%s/.%s.old", dir, name);
    rm_tree(old);
    struct stat sb;
    int replaced = stat(final_dir, &sb) == 0;
    if (replaced && rename(final_dir, old) != 0) {
        snprintf(err, errn, "%s: cannot move the existing checkpoint aside (%s)", final_dir, strerror(errno));
        out_abort(&lf);
        return 0;
    }
    if (rename(tmp, final_dir) != 0) {
        snprintf(err, errn, "%s: cannot rename into place (%s)", final_dir, strerror(errno));
        if (replaced) rename(old, final_dir);
        out_abort(&lf);
        return 0;
    }
    if (!out_rename(&lf)) {   // also syncs DIR, which makes both renames durable
        snprintf(err, errn, "%s", lf.err);
        if (lf.renamed) {   // only the sync failed: the new checkpoint and latest are in place, complete
            rm_tree(old);
            *published = 1;
            return 0;
        }
        rename(final_dir, tmp);
        if (replaced) rename(old, final_dir);
        return 0;
    }
    rm_tree(old);
    return 1;
}

// this rank's optimizer partition: header, m, v
static int optim_file_write(Zero *z, const char *path, char *err, size_t errn) {
    const ZeroPlan *p = &z->plan;
    OutFile f;
    if (out_open(&f, path, 0)) {
        int32_t h[256];
        optim_header(h, p->P, p->part, p->n_units, ZERO_ALIGN, p->shard_elems);
        out_write(&f, h, sizeof(h));
        // m, then v, a piece at a time: the whole partition is never copied
        size_t piece = p->max_shard;
        float *buf = (float *)xmalloc(piece * 4, "optimizer state");
        for (int which = 0; which < 2; which++)
            for (size_t off = 0; off < p->shard_elems; off += piece) {
                size_t n = p->shard_elems - off < piece ? p->shard_elems - off : piece;
                zero_optim_read(z, which, off, n, buf);
                out_write(&f, buf, n * 4);
            }
        free(buf);
    }
    if (!out_finish(&f)) { snprintf(err, errn, "%s", f.err); return 0; }
    return 1;
}

// Every rank: did every rank succeed? If not, rank 0 removes the temporary files and
// every rank stops with the failing rank's line, which says what is on disk. Rank 0
// cleans up before anyone exits, because mpirun ends the job at the first exit.
// published: rank 0's checkpoint_publish put the checkpoint in place, and only
// syncing DIR failed.
static void save_agree(Comm *c, int ok, int published, char *err, size_t errn, const char *tmp, const char *dir, const char *name) {
    if (comm_agree(c, ok, err, errn)) return;
    comm_all_reduce_host(c, &published, 1, DT_I32, OP_MAX);   // rank 0's flag, for every rank's message
    if (c->rank == 0 && !published) {
        char latest_tmp[1100];
        snprintf(latest_tmp, sizeof(latest_tmp), "%s/latest.tmp", dir);
        rm_tree(tmp);
        unlink(latest_tmp);
    }
    comm_barrier(c);
    if (published)
        fatal("checkpoint %s saved, but %s: it is complete and %s/latest names it, but a crash now could undo either "
              "(the older checkpoints are kept); stopping", name, err, dir);
    fatal("checkpoint %s not saved: %s (the temporary files are removed; the previous checkpoints and %s/latest are unchanged)",
          name, err, dir);
}

// Collective: returns once the checkpoint of st is complete and DIR/latest names it;
// on any failure every rank stops (save_agree).
static void checkpoint_save(Zero *z, const char *dir, const TrainState *st, const TrainConfig *tc) {
    Comm *c = z->comm;
    const ZeroPlan *p = &z->plan;
    char name[64], tmp[1024], path[1100], err[1600] = "";
    snprintf(name, sizeof(name), "ckpt_%08d", st->step);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    int ok = 1;
    if (c->rank == 0) {
        rm_tree(tmp);
        if (mkdir(tmp, 0755) != 0) ok = 0, snprintf(err, sizeof(err), "%s: cannot create (%s)", tmp, strerror(errno));
    }
    save_agree(c, ok, 0, err, sizeof(err), tmp, dir, name);
    snprintf(path, sizeof(path), "%s/model.bin", tmp);
    ok = model_file_write(z, path, err, sizeof(err));
    // optimizer partitions: in stage 0 every rank holds the same full state, rank 0 writes it
    if (ok && (p->P > 1 || c->rank == 0)) {
        snprintf(path, sizeof(path), "%s/optim_rank_%05d.bin", tmp, p->part);
        ok = optim_file_write(z, path, err, sizeof(err));
    }
    save_agree(c, ok, 0, err, sizeof(err), tmp, dir, name);
    int published = 0;
    if (c->rank == 0) ok = checkpoint_publish(z, dir, name, tmp, st, tc, &published, err, sizeof(err));
    save_agree(c, ok, published, err, sizeof(err), tmp, dir, name);
    if (c->rank == 0 && tc->keep_last > 0) checkpoint_prune(dir, tc->keep_last, st->step, !tc->quiet);
}

// Collective, at start-up, before a run saves into dir from step `start`: rank 0 sets
// aside the checkpoints there past that step (checkpoint_set_aside) and says so.
static void checkpoint_claim_dir(Comm *c, const char *dir, int start) {
    char err[1600] = "", note[2048] = "";
    int ok = c->rank != 0 || checkpoint_set_aside(dir, start, note, sizeof(note), err, sizeof(err));
    if (note[0]) diag("note", "%s", note);
    if (!comm_agree(c, ok, err, sizeof(err))) fatal("--save: %s", err);
}

// ----------------------------------------------------------------------------
// resuming

#define CK_FAIL(...) do { snprintf(err, errn, __VA_ARGS__); return 0; } while (0)

// the whole of a small file, NUL-terminated (*len bytes), or NULL with err set
static char *read_text_file(const char *path, size_t *len, char *err, size_t errn) {
    FILE *f = fopen_regular(path, "rb", "a manifest", err, errn);
    if (!f) return NULL;
    fseeko(f, 0, SEEK_END);
    long long n = ftello(f);
    fseeko(f, 0, SEEK_SET);
    if (n < 0 || n > (1 << 24)) { fclose(f); snprintf(err, errn, "%s: not a manifest (size %lld)", path, n); return NULL; }
    char *text = (char *)xmalloc(n + 1, "manifest");
    size_t got = fread(text, 1, n, f);
    fclose(f);
    if (got != (size_t)n) { free(text); snprintf(err, errn, "%s: read failed", path); return NULL; }
    text[n] = 0;
    *len = (size_t)n;
    return text;
}

// A manifest's file: it must exist with the recorded size and CRC-32.
static int checkpoint_check_file(const char *ck, const ManifestFile *fe, char *err, size_t errn) {
    char fp[1300];
    snprintf(fp, sizeof(fp), "%s/%s", ck, fe->name);
    struct stat sb;
    if (stat(fp, &sb) != 0) CK_FAIL("%s: missing (%s)", fp, strerror(errno));
    if ((long long)sb.st_size != fe->bytes) CK_FAIL("%s: %lld bytes, the manifest says %lld (truncated or altered)", fp, (long long)sb.st_size, fe->bytes);
    long long sz;
    uint32_t crc;
    if (!file_crc(fp, &sz, &crc, err, errn)) return 0;
    if (crc != fe->crc) CK_FAIL("%s: CRC-32 %08x does not match the manifest's %08x (corrupted)", fp, crc, fe->crc);
    return 1;
}

// Reads checkpoint directory ck's manifest into m and checks it and every file it lists.
// Returns 1, or 0 with a one-line err (m freed).
static int checkpoint_verify(const char *ck, Manifest *m, char *err, size_t errn) {
    char path[1200];
    size_t n;
    memset(m, 0, sizeof(*m));
    snprintf(path, sizeof(path), "%.1100s/manifest.json", ck);
    char *text = read_text_file(path, &n, err, errn);
    if (!text) return 0;
    int ok = manifest_parse(text, n, path, m, err, errn);
    free(text);
    for (int i = 0; ok && i < m->n_files; i++) ok = checkpoint_check_file(ck, &m->files[i], err, errn);
    if (!ok) manifest_free(m);
    return ok;
}

// The checkpoints --resume DIR may take, in the order to try them: DIR alone if it
// holds a manifest, else the one DIR/latest names, then every ckpt_ directory of
// DIR, newest first. Returns how many, at most max; 0 with err if there are none.
#define RESUME_MAX_CANDIDATES 64
static int checkpoint_candidates(const char *dir, char (*out)[1100], int max, char *err, size_t errn) {
    char path[1100];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    if (stat(path, &sb) == 0) { snprintf(out[0], 1100, "%s", dir); return 1; }
    int n = 0;
    char name[256];
    if (!checkpoint_latest_read(dir, name, sizeof(name), err, errn)) return 0;
    if (name[0]) snprintf(out[n++], 1100, "%s/%s", dir, name);
    int steps[RESUME_MAX_CANDIDATES];
    int k = checkpoint_list(dir, steps, max);
    for (int i = 0; i < k && n < max; i++) {
        char cand[1100];
        snprintf(cand, sizeof(cand), "%s/ckpt_%08d", dir, steps[i]);
        if (n == 0 || strcmp(cand, out[0]) != 0) snprintf(out[n++], 1100, "%s", cand);
    }
    if (n == 0) snprintf(err, errn, "%s: no checkpoint here (no manifest.json, no latest, no ckpt_ directory)", dir);
    return n;
}

// What a resumed run must share with the checkpoint m in ck: the model, the sequence
// length, the global batch and the data, and it must have steps left. The micro
// batch, accumulation and ranks may be regrouped, since the data order stays the
// same. Returns 1, with rank 0's notes printed when say, or 0 with a one-line err.
static int checkpoint_compatible(const Manifest *m, const char *ck, const ZeroPlan *p, const TrainConfig *tc, const TrainState *data,
                                 int world, int say, char *err, size_t errn) {
    if ((size_t)m->num_params != p->num_params)
        CK_FAIL("%s: checkpoint has %lld parameters, this run's model has %zu: the run took its model from the newest readable "
                "checkpoint in %s, which did not verify, and this older one is of another model; resume a given ckpt_ directory",
                ck, m->num_params, p->num_params, tc->resume_dir);
    if (m->align != ZERO_ALIGN) CK_FAIL("%s: alignment %d differs from this build's %d", ck, m->align, ZERO_ALIGN);
    if (!data) return 1;   // sampling (--sample 1): only the weights are read
    if (tc->steps <= m->step)
        CK_FAIL("--steps %d is at or below the checkpoint's step %d (%s): nothing left to train; ask for more steps", tc->steps, m->step, ck);
    if (m->seq > 0 && m->seq != tc->T)
        CK_FAIL("--seq %d differs from the checkpoint's sequence length %d (%s): resuming would not continue its run "
                "(to train on from its weights with other settings, start a new run with --init %s/model.bin)", tc->T, m->seq, ck, ck);
    if (m->total_batch > 0 && m->total_batch != tc->total_batch)
        CK_FAIL("the global batch of %d sequences (micro batch %d x accumulation %d x %d ranks) differs from the checkpoint's %d (%s): "
                "resuming would not continue its run (to train on with another batch, start a new run with --init %s/model.bin)",
                tc->total_batch, tc->B, tc->accum, world, m->total_batch, ck, ck);
    if (say && m->batch > 0 && (m->batch != tc->B || m->accum != tc->accum || m->world != world))
        diag("note", "%s: micro batch %d x accumulation %d x %d ranks regrouped as %d x %d x %d: the same global batch of %d sequences "
             "in the same data order", ck, m->batch, m->accum, m->world, tc->B, tc->accum, world, tc->total_batch);
    if (m->train_tokens >= 0) {
        if (m->train_tokens != data->data_tokens || m->train_crc != data->data_crc)
            CK_FAIL("--train %s holds other data (%lld tokens, CRC-32 %08x) than the checkpoint trained on (%s: %lld tokens, CRC-32 %08x; %s): "
                    "its data position would point into other data (to train on new data from its weights, start a new run with --init %s/model.bin)",
                    tc->train_path, data->data_tokens, data->data_crc, m->train_path, m->train_tokens, m->train_crc, ck, ck);
        if (say && strcmp(m->train_path, tc->train_path) != 0)
            diag("note", "%s: --train %s is not the checkpoint's %s, but holds the same tokens: resuming", ck, tc->train_path, m->train_path);
    } else if (say) {
        diag("note", "%s: a format-%d manifest (written before zeroc checksummed manifests): the manifest itself and its data file "
             "(%s) cannot be verified; its files' sizes and CRC-32s were checked", ck, m->format, m->train_path[0] ? m->train_path : "not recorded");
    }
    return 1;
}

// The parameters and optimizer state of checkpoint ck, whose manifest m is verified,
// into z, resharded from its writer's partitions: each rank reads only the pieces
// its own partition holds, a piece at a time.
static int checkpoint_read_state(Zero *z, const char *ck, const Manifest *m, char *err, size_t errn) {
    const ZeroPlan *p = &z->plan;
    char path[1200];
    snprintf(path, sizeof(path), "%s/model.bin", ck);
    ParamSource src;
    if (!params_from_file(&src, z->layout, path, err, errn)) return 0;
    int ok = zero_load_params(z, &src);
    if (!ok) snprintf(err, errn, "%s", src.err);
    params_close(&src);
    // optimizer state: the writer had Pw partitions, with their own padding
    int Pw = m->partitions;
    float *piece = (float *)xmalloc(p->max_shard * 4, "optimizer state");
    size_t *w_shard_off = (size_t *)xcalloc(sizeof(size_t) * (p->n_units + 1), "reshard plan");
    for (int i = 0; i < p->n_units; i++) w_shard_off[i + 1] = w_shard_off[i] + zero_padded(p->u[i].numel, Pw) / Pw;
    size_t w_shard_elems = w_shard_off[p->n_units];
    for (int i = 0; i < p->n_units && ok; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t w_shard = zero_padded(U->numel, Pw) / Pw;
        size_t lo = (size_t)p->part * U->shard, hi = lo + U->shard;
        if (hi > U->numel) hi = U->numel;
        for (size_t a = lo; a < hi && ok;) {
            int wp = (int)(a / w_shard);
            size_t b = ((size_t)wp + 1) * w_shard;
            if (b > hi) b = hi;
            snprintf(path, sizeof(path), "%s/optim_rank_%05d.bin", ck, wp);
            FILE *of = fopen_regular(path, "rb", "an optimizer shard", err, errn);
            if (!of) { ok = 0; break; }
            int32_t h[256];
            ok = fread(h, 4, 256, of) == 256;
            if (!ok) snprintf(err, errn, "%s: short read of the header", path);
            ok = ok && optim_header_check(h, Pw, wp, w_shard_elems, m->files[wp + 1].bytes, path, err, errn);
            size_t src_off = w_shard_off[i] + (a - (size_t)wp * w_shard), dst = U->shard_off + (a - lo);
            for (int which = 0; which < 2 && ok; which++) {
                ok = fseeko(of, 1024 + 4 * (off_t)(which * w_shard_elems + src_off), SEEK_SET) == 0 && fread(piece, 4, b - a, of) == b - a;
                if (!ok) { snprintf(err, errn, "%s: short read", path); break; }
                // a forged CRC must not smuggle in what AdamW never writes: non-finite m or v, or v below 0
                size_t bad = first_nonfinite(piece, b - a);
                for (size_t e = 0; which == 1 && e < bad; e++) if (piece[e] < 0) { bad = e; break; }
                if (bad < b - a) {
                    snprintf(err, errn, "%s: the %s holds %g at element %zu of unit %s (AdamW's m is finite, its v finite and "
                             ">= 0): a damaged or edited file", path, which ? "second moment v" : "first moment m", piece[bad],
                             a + bad, z->layout->units[i].name);
                    ok = 0;
                } else zero_optim_write(z, which, dst, b - a, piece);
            }
            fclose(of);
            a = b;
        }
    }
    free(w_shard_off);
    free(piece);
    return ok;
}
#undef CK_FAIL

// The checkpoint --resume DIR takes: the first candidate that verifies on every rank
// of c. With c NULL this process decides alone and nothing is collective. With say
// the skipped ones are named with their reason, after `who`. Returns 1 with ck and m,
// which the caller frees, or 0 with err.
static int checkpoint_choose(Comm *c, const char *dir, const char *who, char *ck, size_t ckn, Manifest *m, int say, char *err, size_t errn) {
    static char cands[RESUME_MAX_CANDIDATES][1100];
    char first_err[1600] = "";
    int n = checkpoint_candidates(dir, cands, RESUME_MAX_CANDIDATES, err, errn);
    if (c ? !comm_agree(c, n > 0, err, errn) : n == 0) return 0;
    for (int i = 0; i < n; i++) {
        int ok = checkpoint_verify(cands[i], m, err, errn);
        if (c ? comm_agree(c, ok, err, errn) : ok) { snprintf(ck, ckn, "%s", cands[i]); return 1; }
        if (!first_err[0]) snprintf(first_err, sizeof(first_err), "%s", err);
        if (n > 1 && say) diag("warning", "%s: skipped %s: %s", who, cands[i], err);
    }
    if (n == 1) snprintf(err, errn, "%s", first_err);
    else snprintf(err, errn, "%s: none of its %d checkpoints verifies (the newest: %s)", dir, n, first_err);
    return 0;
}

// Collective: --resume. Takes the checkpoint checkpoint_choose picks, checks that this
// run can continue it, and loads it into z and st. Any failure stops every rank with
// the same one line. Rank 0 prints the warnings and notes on stderr and, with say,
// the checkpoint taken on stdout. On entry st holds this run's train data
// (data_tokens, data_crc) and, in st->guard, its scaler settings; data_tokens 0
// means sampling, which reads only the weights.
static void checkpoint_load(Zero *z, const TrainConfig *tc, TrainState *st, int say) {
    Comm *c = z->comm;
    char err[1600] = "", ck[1100];
    Manifest m;
    if (!checkpoint_choose(c, tc->resume_dir, "--resume", ck, sizeof(ck), &m, c->rank == 0, err, sizeof(err))) fatal("%s", err);
    int ok = checkpoint_compatible(&m, ck, &z->plan, tc, st->data_tokens ? st : NULL, c->world, c->rank == 0, err, sizeof(err));
    char mpath[1200];
    snprintf(mpath, sizeof(mpath), "%s/manifest.json", ck);
    ok = ok && data_state_read(m.json, &st->data, mpath, err, sizeof(err));
    ok = ok && step_guard_from_json(&st->guard, m.json, mpath, err, sizeof(err));
    if (!comm_agree(c, ok, err, sizeof(err))) fatal("%s", err);
    ok = checkpoint_read_state(z, ck, &m, err, sizeof(err));
    if (!comm_agree(c, ok, err, sizeof(err))) fatal("%s", err);
    st->step = m.step;
    st->rng = m.rng;
    if (say) printf("resumed from %s at step %d\n", ck, st->step);
    manifest_free(&m);
}

// ----------------------------------------------------------------------------
// what a run takes from its --resume checkpoint or --init model file

// The newest checkpoint --resume DIR would try whose manifest and model header read
// (the full check of its files comes with checkpoint_load): its path, manifest and model.
static int checkpoint_peek(const char *dir, char *ck, size_t ckn, Manifest *m, ModelConfig *mc) {
    static char cands[RESUME_MAX_CANDIDATES][1100];
    char err[1600], path[1200];
    int n = checkpoint_candidates(dir, cands, RESUME_MAX_CANDIDATES, err, sizeof(err));
    for (int i = 0; i < n; i++) {
        size_t len;
        long long params;
        snprintf(path, sizeof(path), "%s/manifest.json", cands[i]);
        char *text = read_text_file(path, &len, err, sizeof(err));
        if (!text) continue;
        int ok = manifest_parse(text, len, path, m, err, sizeof(err));
        free(text);
        snprintf(path, sizeof(path), "%s/model.bin", cands[i]);
        if (ok && model_file_config(path, mc, &params, err, sizeof(err))) { snprintf(ck, ckn, "%s", cands[i]); return 1; }
        if (ok) manifest_free(m);
    }
    return 0;
}

// After parse_args, on every rank alike (each reads the same small files). As nanoGPT's
// resume takes model_args from its checkpoint, --resume DIR takes the model from the
// checkpoint, and what no flag or config key sets: the sequence length, the batch,
// --steps (the run's planned length) and the schedule's horizon (so that a larger --steps
// does not stretch the decay: one note says what the steps past it get; --lr-total-steps
// re-plans it). --init FILE (a zeroc model file) gives its model. An explicit flag that
// disagrees with the model is one error naming both (config_take_model). Then the model
// is checked as parse_args checks a model from flags.
static void config_from_run_files(TrainConfig *tc, int world, int argc, char **argv, int say) {
    ModelConfig mc;
    char ck[1100], err[1600];
    Manifest m;
    long long params;
    if (tc->resume_dir[0] && checkpoint_peek(tc->resume_dir, ck, sizeof(ck), &m, &mc)) {
        config_take_model(tc, &mc, "the checkpoint's", ck, argc, argv);
        snprintf(tc->preset, sizeof(tc->preset), "(checkpoint)");
        int batch_given = tc->from[FROM_B] || tc->from[FROM_ACCUM] || tc->from[FROM_TOTAL];
        if (!tc->sample && !flag_given(argc, argv, "--seq") && m.seq > 0) tc->T = m.seq;
        if (!tc->sample && !batch_given && m.total_batch > 0) {
            // the same global batch; the same micro batch where this world size can keep it (the accumulation
            // fills the rest), else the global batch over the ranks without accumulation
            tc->total_batch = m.total_batch;
            tc->from[FROM_TOTAL] = "--resume";
            if (m.batch > 0 && m.total_batch % ((long long)m.batch * world) == 0) { tc->B = m.batch; tc->from[FROM_B] = "--resume"; }
        }
        if (!flag_given(argc, argv, "--steps") && !tc->from[FROM_SCHED_TOTAL] && m.steps > 0) tc->steps = m.steps;
        if (!tc->from[FROM_SCHED_TOTAL] && m.lr_total_steps > 0) {
            tc->sched_total = m.lr_total_steps;
            int decays = tc->sched != SCHED_CONSTANT && tc->sched != SCHED_WARMUP_LR;
            int first = (m.step > tc->sched_total ? m.step : tc->sched_total) + 1;   // this run's first step past the horizon
            if (say && decays && !tc->sample && tc->steps >= first)
                diag("note", "--resume: the learning-rate schedule is the checkpoint's, planned for %d steps: steps %d-%d continue "
                     "it past its end (lr %.2e at step %d); --lr-total-steps %d re-plans it", tc->sched_total, first,
                     tc->steps, (double)lr_at(tc, first - 1, tc->sched_total), first, tc->steps);
        }
        manifest_free(&m);
    } else if (!tc->resume_dir[0] && tc->init_path[0] && !st_sniff(tc->init_path) &&
               model_file_config(tc->init_path, &mc, &params, err, sizeof(err))) {
        config_take_model(tc, &mc, "the model file's", tc->init_path, argc, argv);
        snprintf(tc->preset, sizeof(tc->preset), "(model file)");
    }
    // (a checkpoint or model file that cannot be read is reported where it is loaded)
    model_config_check(tc);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
