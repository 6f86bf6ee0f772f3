/*
tools/export_model.c: a zeroc checkpoint to Hugging Face's format, the way DeepSpeed's zero_to_fp32 and
llm.c's export_hf do it for theirs:

    make export_model
    ./export_model CKPT OUT_DIR [--dtype fp32|bf16] [--tokenizer FILE]

CKPT is a --save directory (its latest checkpoint), a ckpt_ directory (the model file is checked
against the manifest's size and CRC-32 first), or a model file (also scripts/train_gpt.py --save's).
OUT_DIR gets model.safetensors (Hugging Face names and layouts, model/hf.h; fp32, or bf16 rounded to
nearest even) and config.json, loadable with GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(OUT_DIR)
and with zeroc's --init OUT_DIR/model.safetensors. With them go the tokenizer files
(tools/hf_tokenizer.h: vocab.json, merges.txt, tokenizer.json, tokenizer_config.json,
special_tokens_map.json) made from zeroc's GPT-2 tokenizer file (--tokenizer, default
data/gpt2_tokenizer.bin), so that AutoTokenizer.from_pretrained(OUT_DIR) loads the folder too;
a model whose vocabulary is not the tokenizer's gets none, with a note. Whatever the stage and world size the checkpoint
was saved at, its model file holds the full fp32 weights; the export reads it one tensor at a time
and never holds more than one tensor (twice: read and rearranged).
*/
#include "train/checkpoint.h"
#include "tools/hf_tokenizer.h"

// ----------------------------------------------------------------------------
// the model file, tensor by tensor: the export's one view of a checkpoint's weights. Today the file
// is the whole model in flat order (docs/model.md); a differently laid out (say, sharded) model file
// changes only these two functions.

typedef struct {
    FILE *f;
    char path[1100];
    ModelLayout L;
} ModelReader;

static void model_reader_open(ModelReader *r, const char *path) {
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->f = fopen_regular_or_die(path, "rb", "a model file");
    long long size = file_size_or_die(r->f, path);
    int32_t h[256], want[256];
    fread_or_die(h, 4, 256, r->f, path, "the model file header");
    if (h[0] != MODEL_MAGIC) fatal("%s: bad magic number %d (expected %d): not a zeroc model file", path, h[0], MODEL_MAGIC);
    if (h[1] != MODEL_VERSION || h[13] != 0) fatal("%s: unsupported version %d / dtype %d (expected %d / 0 = fp32)", path, h[1], h[13], MODEL_VERSION);
    ModelConfig c;
    memset(&c, 0, sizeof(c));
    c.arch = h[2]; c.n_layer = h[3]; c.n_head = h[4]; c.n_kv_head = h[5]; c.d_model = h[6]; c.d_ff = h[7];
    c.vocab_size = h[8]; c.padded_vocab = h[9]; c.max_seq = h[10];
    memcpy(&c.norm_eps, &h[11], 4); memcpy(&c.rope_theta, &h[12], 4);
    if ((c.arch != ARCH_GPT2 && c.arch != ARCH_LLAMA) || c.n_layer < 1 || c.n_head < 1 || c.n_kv_head < 1 || c.d_model < 1 ||
        c.d_ff < 1 || c.vocab_size < 2 || c.max_seq < 1 || c.d_model % c.n_head || c.n_head % c.n_kv_head ||
        c.padded_vocab != round_up(c.vocab_size, 128))
        fatal("%s: the header does not describe a valid model", path);
    model_layout_build(&r->L, &c);
    model_header(want, &c, r->L.num_params);   // the header must be exactly what a zeroc trainer writes
    if (memcmp(h, want, 16 * sizeof(int32_t)) != 0) fatal("%s: inconsistent header (parameter count)", path);
    long long expect = 1024 + 4LL * (long long)r->L.num_params;
    if (size != expect) fatal("%s: %s file: %lld bytes, expected %lld", path, size < expect ? "truncated" : "oversized", size, expect);
}

// tensor k of unit u, fp32, into out; its values checked finite
static void model_reader_tensor(ModelReader *r, int u, int k, float *out) {
    const TensorSpec *t = &r->L.units[u].t[k];
    off_t at = 1024 + 4 * (off_t)(r->L.units[u].flat_offset + t->offset);
    if (fseeko(r->f, at, SEEK_SET) != 0) fatal("%s: cannot seek (%s)", r->path, strerror(errno));
    fread_or_die(out, 4, t->numel, r->f, r->path, t->name);
    char err[1400];
    if (!params_check_finite(&r->L, u, t->offset, out, t->numel, r->path, err, sizeof(err))) fatal("%s", err);
}

static void model_reader_close(ModelReader *r) { fclose(r->f); model_layout_free(&r->L); }

// ----------------------------------------------------------------------------

// the model file CKPT names (see the top); a checkpoint's is checked against its manifest
static void resolve_model_file(const char *ckpt, char *out, size_t n) {
    struct stat sb;
    if (stat(ckpt, &sb) != 0) fatal("%s: cannot open (%s)", ckpt, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) { snprintf(out, n, "%s", ckpt); return; }
    char ck[1024], path[1100], err[1400];
    snprintf(path, sizeof(path), "%s/manifest.json", ckpt);
    snprintf(out, n, "%s/model.bin", ckpt);
    char base[1024];
    snprintf(base, sizeof(base), "%s", ckpt);
    for (size_t k = strlen(base); k > 1 && base[k - 1] == '/'; k--) base[k - 1] = 0;
    int named = ckpt_step_of(path_base(base)) >= 0;   // a ckpt_ directory asked for by name: that one or none
    if (named && stat(path, &sb) != 0) fatal("%s: not a complete checkpoint (no manifest.json)", ckpt);
    if (stat(path, &sb) != 0 && stat(out, &sb) == 0) return;   // scripts/train_gpt.py --save DIR: a bare model file
    // the checkpoint --resume would take: the newest that verifies; if it is not the one latest
    // names, the warnings above said why, and this says which was taken
    Manifest m;
    if (!checkpoint_choose(NULL, ckpt, "export_model", ck, sizeof(ck), &m, 1, err, sizeof(err))) fatal("%s", err);
    manifest_free(&m);
    char name[256];
    checkpoint_latest_name(ckpt, name, sizeof(name));
    if (strcmp(ckpt, ck) != 0 && strcmp(path_base(ck), name) != 0)
        diag("warning", "export_model: exporting %s, the newest checkpoint of %s that verifies; %s", ck, ckpt,
             name[0] ? "the one latest names does not (see above)" : "there is no latest");
    snprintf(out, n, "%s/model.bin", ck);
}

// The tokenizer the export writes the files of (tools/hf_tokenizer.h), loaded into t before
// anything is written: 1, or 0 when there is none to write (a note says why). An explicit
// --tokenizer that cannot be used is an error; the default one missing is a note.
static int export_tokenizer_open(Tokenizer *t, const char *flag_path, const ModelConfig *mc, const char *out_dir) {
    const char *path = flag_path ? flag_path : "data/gpt2_tokenizer.bin";
    struct stat sb;
    if (!flag_path && stat(path, &sb) != 0) {
        diag("note", "%s not found: no tokenizer files written, so AutoTokenizer will not load %s (make data, or --tokenizer FILE)",
             path, out_dir);
        return 0;
    }
    tokenizer_init(t, path);
    char err[1200];
    if (!hf_tokenizer_usable(t, err, sizeof(err))) fatal("%s", err);
    if (mc->vocab_size == t->vocab_size) return 1;
    if (flag_path) fatal("--tokenizer %s: %d tokens, but the model's vocabulary has %d", path, t->vocab_size, mc->vocab_size);
    diag("note", "the model's vocabulary has %d tokens, the tokenizer (%s) %d: no tokenizer files written", mc->vocab_size, path, t->vocab_size);
    tokenizer_free(t);
    return 0;
}

// ----------------------------------------------------------------------------
// The export is written into a new folder beside OUT_DIR and moved into place only when every file is
// complete: a full disk or any other failure leaves OUT_DIR as it was, and the folder is removed on
// the way out. Into an existing OUT_DIR each file is renamed over its old version, which needs no
// space, and an export file of an older export that this one does not write is removed, so the
// folder never mixes two exports. Other files in OUT_DIR are left alone.

static const char *EXPORT_FILES[] = {"model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer.json",
                                     "tokenizer_config.json", "special_tokens_map.json"};
#define N_EXPORT_FILES ((int)(sizeof(EXPORT_FILES) / sizeof(EXPORT_FILES[0])))
static char g_stage[1200];   // the folder being written; "" once moved into place

static void export_stage_remove(void) { if (g_stage[0]) rm_tree(g_stage); }

// a new, empty folder beside out_dir, into stage; out_dir itself checked to be a folder if it exists
static void export_stage_open(const char *out_dir, char *stage, size_t n) {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s", out_dir);
    for (size_t k = strlen(dir); k > 1 && dir[k - 1] == '/'; k--) dir[k - 1] = 0;
    struct stat sb;
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) fatal("%s: %s, not a directory to export into", out_dir, file_kind(sb.st_mode));
    const char *base = path_base(dir);
    snprintf(stage, n, "%.*s.%s.export-%d", (int)(base - dir), dir, base, (int)getpid());
    atexit(export_stage_remove);
    if (mkdir(stage, 0755) != 0) fatal("%s: cannot create directory (%s)", stage, strerror(errno));
    snprintf(g_stage, sizeof(g_stage), "%s", stage);
}

// the complete export in stage moved to out_dir (see above)
static void export_stage_commit(const char *stage, const char *out_dir) {
    char err[1300];
    if (rename(stage, out_dir) != 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) fatal("%s: cannot rename into place as %s (%s)", stage, out_dir, strerror(errno));
        char stale[200] = "";
        for (int i = 0; i < N_EXPORT_FILES; i++) {
            char from[1400], to[1400];
            snprintf(from, sizeof(from), "%s/%s", stage, EXPORT_FILES[i]);
            snprintf(to, sizeof(to), "%s/%s", out_dir, EXPORT_FILES[i]);
            int written = access(from, F_OK) == 0, had = access(to, F_OK) == 0;
            if (written ? rename(from, to) != 0 : had && unlink(to) != 0) fatal("%s: cannot replace (%s)", to, strerror(errno));
            if (!written && had) snprintf(stale + strlen(stale), sizeof(stale) - strlen(stale), "%s%s", stale[0] ? ", " : "", EXPORT_FILES[i]);
        }
        rmdir(stage);
        if (stale[0]) diag("note", "%s: removed %s of an older export, which this one does not write", out_dir, stale);
    }
    g_stage[0] = 0;
    char any[1400];
    snprintf(any, sizeof(any), "%s/config.json", out_dir);
    if (!fsync_parent_dir(any, err, sizeof(err)) || !fsync_parent_dir(out_dir, err, sizeof(err))) fatal("%s", err);
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *out_dir = NULL, *tok_path = NULL;
    int dtype = ST_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: %s CKPT OUT_DIR [--dtype fp32|bf16] [--tokenizer FILE]\n"
                   "  CKPT: a --save directory, a ckpt_ directory or a model file\n"
                   "  writes OUT_DIR/model.safetensors and OUT_DIR/config.json (Hugging Face GPT2LMHeadModel / LlamaForCausalLM)\n"
                   "  and the tokenizer files (vocab.json, merges.txt, tokenizer.json, tokenizer_config.json,\n"
                   "  special_tokens_map.json) from --tokenizer FILE (default data/gpt2_tokenizer.bin)\n", argv[0]);
            return 0;
        }
        if (!strcmp(argv[i], "--dtype")) {
            if (i + 1 >= argc) fatal("--dtype: missing value");
            const char *v = argv[++i];
            if (!strcmp(v, "fp32")) dtype = ST_F32;
            else if (!strcmp(v, "bf16")) dtype = ST_BF16;
            else fatal("--dtype: expected fp32 or bf16, got '%s'", v);
        } else if (!strcmp(argv[i], "--tokenizer")) {
            if (i + 1 >= argc) fatal("--tokenizer: missing value");
            tok_path = argv[++i];
        } else if (!strncmp(argv[i], "--", 2)) fatal("unknown flag '%s' (see --help)", argv[i]);
        else if (!ckpt) ckpt = argv[i];
        else if (!out_dir) out_dir = argv[i];
        else fatal("unexpected argument '%s' (usage: %s CKPT OUT_DIR [--dtype fp32|bf16] [--tokenizer FILE])", argv[i], argv[0]);
    }
    if (!out_dir) fatal("usage: %s CKPT OUT_DIR [--dtype fp32|bf16] [--tokenizer FILE]", argv[0]);

    char model_path[1100], st_path[1300], cfg_path[1300];
    resolve_model_file(ckpt, model_path, sizeof(model_path));
    ModelReader r;
    model_reader_open(&r, model_path);
    const ModelLayout *L = &r.L;
    Tokenizer tok;
    int with_tokenizer = export_tokenizer_open(&tok, tok_path, &L->cfg, out_dir);
    char stage[1200];
    export_stage_open(out_dir, stage, sizeof(stage));
    snprintf(st_path, sizeof(st_path), "%s/model.safetensors", stage);
    snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", stage);

    HFTensor *map = (HFTensor *)xmalloc(sizeof(HFTensor) * hf_max_tensors(L), "tensor map");
    int n = hf_tensors(L, map);
    STSpec *spec = (STSpec *)xcalloc(sizeof(STSpec) * n, "tensor list");
    size_t max_numel = 0, exported = 0;
    for (int i = 0; i < n; i++) {
        snprintf(spec[i].name, sizeof(spec[i].name), "%s", map[i].name);
        spec[i].dtype = dtype;
        spec[i].ndim = hf_shape(&map[i], spec[i].shape);
        size_t numel = L->units[map[i].unit].t[map[i].k].numel;
        if (numel > max_numel) max_numel = numel;
        exported += (size_t)map[i].rows * map[i].cols;
    }
    float *zt = (float *)xmalloc(max_numel * 4, "zeroc tensor"), *ht = (float *)xmalloc(max_numel * 4, "exported tensor");
    uint16_t *hb = (uint16_t *)xmalloc(max_numel * 2, "bf16 tensor");
    AtomicFile a = atomic_open(st_path);
    STWriter w;
    st_writer_begin(&w, a.f, a.tmp, spec, n, "pt");
    int cur_u = -1, cur_k = -1;
    for (int i = 0; i < n; i++) {
        const HFTensor *h = &map[i];
        if (h->unit != cur_u || h->k != cur_k) { model_reader_tensor(&r, h->unit, h->k, zt); cur_u = h->unit; cur_k = h->k; }
        const float *src = zt + (size_t)h->row0 * h->cols;
        size_t numel = (size_t)h->rows * h->cols;
        for (int row = 0; row < h->rows; row++)
            for (int c = 0; c < h->cols; c++) ht[hf_index(h, row, c)] = src[(size_t)row * h->cols + c];
        if (dtype == ST_BF16) {
            for (size_t e = 0; e < numel; e++) hb[e] = float_to_bf16_rne(ht[e]);
            st_writer_put(&w, hb, numel * 2);
        } else {
            st_writer_put(&w, ht, numel * 4);
        }
    }
    st_writer_end(&w);
    atomic_commit(&a);
    const ModelConfig *mc = &L->cfg;
    hf_config_write(mc, cfg_path, dtype == ST_BF16 ? "bfloat16" : "float32");
    if (with_tokenizer) hf_tokenizer_write(&tok, stage, mc->max_seq);
    export_stage_commit(stage, out_dir);
    printf("%s -> %s/model.safetensors (%s, %d tensors, %zu parameters: %s vocabulary %d of %d rows%s) + config.json (%s)\n",
           model_path, out_dir, ST_DTYPE_NAMES[dtype], n, exported, arch_name(mc->arch), mc->vocab_size, mc->padded_vocab,
           mc->arch == ARCH_GPT2 ? ", head tied to wte" : "", mc->arch == ARCH_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
    if (with_tokenizer) {
        printf("%s -> %s/{vocab.json, merges.txt, tokenizer.json, tokenizer_config.json, special_tokens_map.json}\n", tok.path, out_dir);
        tokenizer_free(&tok);
    }
    free(zt); free(ht); free(hb); free(spec); free(map);
    model_reader_close(&r);
    return 0;
}
