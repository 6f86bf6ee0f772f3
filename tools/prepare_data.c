// tools/prepare_data.c: the data tool. Builds the tokenizer file, tokenizes text into token
// shards (dataloader.h format), and encodes/decodes for tests. See docs/data.md.
//
//   ./prepare_data --make-tokenizer ENCODER_JSON VOCAB_BPE OUT.bin
//   ./prepare_data --input FILE.txt [--input MORE.txt ...] --out PREFIX [--val-fraction X] [--shard-tokens N]
//   ./prepare_data --encode          < text    > ids (one per line)
//   ./prepare_data --decode          < ids     > text
//   ./prepare_data --decode-shard FILE.bin      > text
// Options: --tokenizer PATH (default data/gpt2_tokenizer.bin), --quiet,
//          --chunk-bytes N (encode in pieces of about N bytes; the result does not depend on it)
//
// Documents: an input file is split at every occurrence of the text "<|endoftext|>"; each
// document is preceded by the EOT token (a leading separator is not doubled), so the shard
// decodes back to the text exactly when the file starts with "<|endoftext|>". Each input file
// starts a new document. Everything else is encoded as ordinary text.
#include "util/common.h"
#include "dataloader.h"
#include "tokenizer.h"
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/mman.h>
#include <fcntl.h>

#define DEFAULT_TOKENIZER "data/gpt2_tokenizer.bin"
#define EOT_TEXT "<|endoftext|>"
#define EOT_TEXT_LEN 13

static void usage(FILE *f) {
    fprintf(f,
        "usage:\n"
        "  prepare_data --make-tokenizer ENCODER_JSON VOCAB_BPE OUT.bin\n"
        "  prepare_data --input FILE.txt [--input FILE2.txt ...] --out PREFIX [--val-fraction X]\n"
        "      writes PREFIX.bin, or with --val-fraction X > 0 PREFIX_train.bin and PREFIX_val.bin\n"
        "      (every round(1/X)-th document goes to val; a single-document input puts its last X of\n"
        "      tokens in val). Documents are separated by the text <|endoftext|>; each is preceded by\n"
        "      the EOT token 50256.\n"
        "      --shard-tokens N: write PREFIX_000000.bin, PREFIX_000001.bin, ... (PREFIX_train_000000.bin ...)\n"
        "      of N tokens each, the last one shorter; a document may continue in the next shard.\n"
        "  prepare_data --encode   < text > token ids, one per line (ordinary text: no special tokens)\n"
        "  prepare_data --decode   < token ids (whitespace separated) > text\n"
        "  prepare_data --decode-shard FILE.bin > text (EOT decodes to <|endoftext|>)\n"
        "options: --tokenizer PATH (default " DEFAULT_TOKENIZER "), --quiet, --chunk-bytes N\n");
}

// ----------------------------------------------------------------------------
// whole-file and whole-stdin reading

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen_regular_or_die(path, "rb", "a text file");
    long long n = file_size_or_die(f, path);
    char *buf = (char *)xmalloc((size_t)n + 1, path);
    fread_or_die(buf, 1, (size_t)n, f, path, "text");
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = (char *)malloc(cap);
    if (!buf) fatal("out of memory reading stdin");
    for (;;) {
        if (n == cap) {
            cap *= 2;
            char *nb = (char *)realloc(buf, cap);
            if (!nb) fatal("out of memory reading stdin (%zu bytes)", n);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) fatal("stdin: read error (%s)", strerror(errno));
            break;
        }
    }
    *len = n;
    return buf;
}

// the directories a file at path needs
static void mkdir_parents(const char *path) {
    char dir[1024], err[1200];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return;
    *slash = 0;
    if (!mkdir_p(dir, err, sizeof(err))) fatal("%s", err);
}

// ----------------------------------------------------------------------------
// --make-tokenizer: encoder.json + vocab.bpe -> tokenizer file (format in tokenizer.h)

// the inverse of GPT-2's bytes_to_unicode (tokenizer.h): code point -> byte, -1 for none
static void gpt2_byte_decoder(int inv[512]) {
    for (int i = 0; i < 512; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) inv[gpt2_byte_to_unicode(b)] = b;
}

// decodes a GPT-2 unicode-mapped string into bytes; returns the length or -1
static int unmap_token(const int inv[512], const char *s, unsigned char *out, int cap) {
    const unsigned char *p = (const unsigned char *)s;
    int n = 0;
    while (*p) {
        unsigned cp;
        if (p[0] < 0x80) { cp = p[0]; p += 1; }
        else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) { cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu); p += 2; }
        else return -1;   // every mapped character is below U+0800
        if (cp >= 512 || inv[cp] < 0 || n >= cap) return -1;
        out[n++] = (unsigned char)inv[cp];
    }
    return n;
}

typedef struct { unsigned char *b; int len; } TokBytes;

static int find_token(const TokBytes *tb, const int32_t *map, uint32_t mask, const unsigned char *s, int n) {
    uint32_t i = (uint32_t)tok_hash(s, (size_t)n) & mask;
    while (map[i] >= 0) {
        if (tb[map[i]].len == n && memcmp(tb[map[i]].b, s, n) == 0) return map[i];
        i = (i + 1) & mask;
    }
    return -1;
}

static void make_tokenizer(const char *enc_path, const char *bpe_path, const char *out_path) {
    int inv[512];
    gpt2_byte_decoder(inv);
    size_t len;
    char *text = read_all(enc_path, &len);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) fatal("%s: not a JSON object (expected GPT-2's encoder.json)", enc_path);
    int V = cJSON_GetArraySize(root);
    if (V < 257 || V > 65536) fatal("%s: %d entries; expected 257..65536", enc_path, V);
    TokBytes *tb = (TokBytes *)xcalloc(sizeof(TokBytes) * V, "vocabulary");
    int eot = -1;
    unsigned char buf[1024];
    for (cJSON *it = root->child; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int)it->valuedouble)
            fatal("%s: value of key \"%s\" is not an integer id", enc_path, it->string);
        int id = it->valueint;
        if (id < 0 || id >= V) fatal("%s: id %d of \"%s\" out of range 0..%d", enc_path, id, it->string, V - 1);
        if (tb[id].b) fatal("%s: id %d appears twice", enc_path, id);
        int n;
        if (strcmp(it->string, EOT_TEXT) == 0) { eot = id; n = EOT_TEXT_LEN; memcpy(buf, EOT_TEXT, n); }
        else n = unmap_token(inv, it->string, buf, (int)sizeof(buf));
        if (n <= 0) fatal("%s: key \"%s\" is not a GPT-2 byte-mapped string", enc_path, it->string);
        if (n > 255) fatal("%s: token %d is %d bytes long; the format allows 255", enc_path, id, n);
        tb[id].b = (unsigned char *)xmalloc(n, "token");
        memcpy(tb[id].b, buf, n);
        tb[id].len = n;
    }
    cJSON_Delete(root);
    free(text);
    if (eot < 0) fatal("%s: no \"%s\" entry", enc_path, EOT_TEXT);
    uint32_t cap = 1;
    while (cap < 4u * (uint32_t)V) cap <<= 1;
    int32_t *map = (int32_t *)xmalloc(sizeof(int32_t) * cap, "vocabulary map");
    for (uint32_t i = 0; i < cap; i++) map[i] = -1;
    for (int id = 0; id < V; id++) {
        if (id == eot) continue;
        if (find_token(tb, map, cap - 1, tb[id].b, tb[id].len) >= 0) fatal("%s: token %d duplicates another token", enc_path, id);
        uint32_t i = (uint32_t)tok_hash(tb[id].b, tb[id].len) & (cap - 1);
        while (map[i] >= 0) i = (i + 1) & (cap - 1);
        map[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        if (find_token(tb, map, cap - 1, &c, 1) < 0) fatal("%s: no token for byte 0x%02x", enc_path, b);
    }
    // vocab.bpe: merge k (0-based, after the "#version" line) must create token 256 + k, so
    // that token ids are merge ranks (what the encoder relies on)
    char *bpe = read_all(bpe_path, &len);
    int line_no = 0, merges = 0;
    char *save = NULL;
    for (char *line = strtok_r(bpe, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (ll == 0 || (line_no == 1 && strncmp(line, "#version", 8) == 0)) continue;   // "# #" is a real merge
        char *sp = strchr(line, ' ');
        if (!sp || strchr(sp + 1, ' ')) fatal("%s: line %d: expected two tokens separated by one space", bpe_path, line_no);
        *sp = 0;
        unsigned char a[512], b[512];
        int na = unmap_token(inv, line, a, 256), nb = unmap_token(inv, sp + 1, b, 256);
        if (na <= 0 || nb <= 0 || na + nb > 255) fatal("%s: line %d: not a GPT-2 byte-mapped merge", bpe_path, line_no);
        memcpy(a + na, b, nb);
        int ia = find_token(tb, map, cap - 1, a, na), ib = find_token(tb, map, cap - 1, b, nb);
        int iab = find_token(tb, map, cap - 1, a, na + nb);
        if (ia < 0 || ib < 0 || iab != 256 + merges)
            fatal("%s: line %d: merge %d does not match %s (expected it to create token %d, got %d)",
                  bpe_path, line_no, merges, enc_path, 256 + merges, iab);
        merges++;
    }
    free(bpe);
    if (merges != V - 257) fatal("%s: %d merges, but %s has %d tokens (expected %d merges)", bpe_path, merges, enc_path, V, V - 257);
    // write
    long long total = 0;
    for (int id = 0; id < V; id++) total += tb[id].len;
    size_t rec_len = (size_t)(V + total);
    unsigned char *rec = (unsigned char *)xmalloc(rec_len, "token records");
    size_t p = 0;
    for (int id = 0; id < V; id++) {
        rec[p++] = (unsigned char)tb[id].len;
        memcpy(rec + p, tb[id].b, tb[id].len);
        p += tb[id].len;
    }
    int32_t header[TOKENIZER_HEADER_INTS] = {0};
    header[0] = TOKENIZER_MAGIC; header[1] = TOKENIZER_VERSION; header[2] = V; header[3] = eot;
    header[4] = (int32_t)total; header[5] = (int32_t)tok_fnv32(2166136261u, rec, rec_len);
    mkdir_parents(out_path);
    AtomicFile a = atomic_open(out_path);
    fwrite_or_die(header, sizeof(header), 1, a.f, a.tmp);
    fwrite_or_die(rec, 1, rec_len, a.f, a.tmp);
    atomic_commit(&a);
    printf("wrote %s: %d tokens (%d merges, EOT %d), %lld bytes\n", out_path, V, merges, eot, (long long)(sizeof(header) + rec_len));
    for (int id = 0; id < V; id++) free(tb[id].b);
    free(tb); free(map); free(rec);
}

// ----------------------------------------------------------------------------
// text -> shards

// The output: PREFIX.bin, or with --shard-tokens N the files PREFIX_000000.bin, PREFIX_000001.bin,
// ... of exactly N tokens each (the last one shorter), each written as soon as it is full, so that
// memory holds one shard whatever the size of the input. A document may continue in the next shard
// (as in llm.c's fineweb.py): the loader reads the shards as one stream (dataloader.h).
typedef struct {
    char prefix[1000];
    long long shard_tokens;    // 0: one file
    uint16_t *buf;
    long long n, cap;          // tokens held
    int index;                 // next shard number
    long long docs, shard_docs, total;
    int quiet;
} ShardWriter;

static void writer_init(ShardWriter *w, const char *prefix, long long shard_tokens, int quiet) {
    memset(w, 0, sizeof(*w));
    if (strlen(prefix) + 16 >= sizeof(w->prefix)) fatal("--out: path too long");
    strcpy(w->prefix, prefix);
    w->shard_tokens = shard_tokens;
    w->quiet = quiet;
}

static void writer_flush(ShardWriter *w, long long n) {
    char path[1080];
    if (w->shard_tokens) snprintf(path, sizeof(path), "%s_%06d.bin", w->prefix, w->index);
    else snprintf(path, sizeof(path), "%s.bin", w->prefix);
    if (n > 0x7fffffffLL)
        fatal("%s: %lld tokens do not fit in one shard (llm.c's readers take at most 2147483647): use --shard-tokens N", path, n);
    mkdir_parents(path);
    shard_write(path, w->buf, n);
    if (!w->quiet) printf("wrote %s: %lld tokens, %lld documents start in it\n", path, n, w->shard_docs);
    memmove(w->buf, w->buf + n, sizeof(uint16_t) * (w->n - n));
    w->n -= n;
    w->index++;
    w->shard_docs = 0;
}

static void writer_push(ShardWriter *w, const int *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 65535) fatal("token id %d does not fit in a uint16 shard", ids[i]);
        if (w->n == w->cap) {
            long long nc = w->cap ? w->cap * 2 : 1 << 20;
            if (w->shard_tokens && nc > w->shard_tokens) nc = w->shard_tokens;
            uint16_t *nb = (uint16_t *)realloc(w->buf, sizeof(uint16_t) * nc);
            if (!nb) fatal("out of memory: %lld tokens", nc);
            w->buf = nb; w->cap = nc;
        }
        w->buf[w->n++] = (uint16_t)ids[i];
        w->total++;
        if (w->shard_tokens && w->n == w->shard_tokens) writer_flush(w, w->n);
    }
}

static void writer_doc(ShardWriter *w) {   // a document starts: its EOT
    int eot = GPT2_EOT;
    w->docs++; w->shard_docs++;
    writer_push(w, &eot, 1);
}

static void writer_finish(ShardWriter *w) {
    if (w->n > 0 || w->index == 0) writer_flush(w, w->n);
    free(w->buf);
}

// Is p a place where the pre-tokenization of the whole text splits, so that the two sides
// can be encoded separately? A newline followed by a printable ASCII character always is:
// no pattern alternative takes whitespace together with what follows it, and the newline's
// whitespace run ends at the non-space character either way.
static int safe_split(const char *s, size_t end, size_t p) {
    return p + 1 < end && s[p] == '\n' && (unsigned char)s[p + 1] >= 0x21 && (unsigned char)s[p + 1] <= 0x7E;
}

typedef struct {
    Tokenizer tok;
    ShardWriter *train, *val, *dst;   // val: NULL without --val-fraction; dst: the current document's
    long long val_period;      // documents d with d % P == P - 1 go to val (0: none)
    long long docs;
    size_t chunk_bytes;
    int quiet;
    size_t bytes_total, bytes_done;
    double t0, last_report;
} Encoder;

static void encode_text(Encoder *e, const char *s, size_t n) {
    size_t pos = 0;
    while (pos < n) {
        size_t end = n;
        if (n - pos > e->chunk_bytes) {
            size_t p = pos + e->chunk_bytes;
            for (;;) {
                const char *nl = (const char *)memchr(s + p, '\n', n - p);
                if (!nl) { p = n; break; }
                p = (size_t)(nl - s);
                if (safe_split(s, n, p)) break;
                p++;
            }
            end = p;
        }
        int *ids = NULL;
        size_t m = tokenizer_encode(&e->tok, s + pos, end - pos, &ids);
        writer_push(e->dst, ids, m);
        free(ids);
        e->bytes_done += end - pos;
        pos = end;
        double now = wall_time();
        if (!e->quiet && e->bytes_total > (16u << 20) && now - e->last_report > 2.0) {
            e->last_report = now;
            long long toks = e->train->total + (e->val ? e->val->total : 0);
            int shards = e->train->index + (e->val ? e->val->index : 0);
            fprintf(stderr, "prepare_data: %5.1f%% (%.1f of %.1f MB), %lld documents, %lld tokens, %d shard%s written, %.1f MB/s\n",
                    100.0 * e->bytes_done / e->bytes_total, e->bytes_done / 1e6, e->bytes_total / 1e6, e->docs,
                    toks, shards, shards == 1 ? "" : "s", e->bytes_done / 1e6 / (now - e->t0));
        }
    }
}

static void encode_file(Encoder *e, const char *text, size_t len) {
    size_t pos = 0;
    if (len >= EOT_TEXT_LEN && memcmp(text, EOT_TEXT, EOT_TEXT_LEN) == 0) pos = EOT_TEXT_LEN;
    for (;;) {
        const char *sep = (const char *)memmem(text + pos, len - pos, EOT_TEXT, EOT_TEXT_LEN);
        size_t end = sep ? (size_t)(sep - text) : len;
        e->dst = e->val_period && e->docs % e->val_period == e->val_period - 1 ? e->val : e->train;
        e->docs++;
        writer_doc(e->dst);
        encode_text(e, text + pos, end - pos);
        if (!sep) break;
        pos = end + EOT_TEXT_LEN;
        e->bytes_done += EOT_TEXT_LEN;
    }
}

// an input file, memory-mapped (read-only; never copied whole into memory)
static const char *map_text(const char *path, size_t *len) {
    char err[1400];
    int fd = open_regular(path, O_RDONLY, "a text file (an input is read whole: a regular file)", err, sizeof(err));
    if (fd < 0) fatal("%s", err);
    struct stat st;
    if (fstat(fd, &st) != 0) fatal("%s: cannot stat (%s)", path, strerror(errno));
    if (st.st_size == 0) fatal("%s: empty file: no text to tokenize", path);
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) fatal("%s: cannot memory-map (%s)", path, strerror(errno));
    close(fd);
    *len = (size_t)st.st_size;
    return (const char *)p;
}

// the documents of one input file: the first, and one more after each separator (encode_file's count)
static long long count_documents(const char *text, size_t len) {
    size_t pos = len >= EOT_TEXT_LEN && memcmp(text, EOT_TEXT, EOT_TEXT_LEN) == 0 ? EOT_TEXT_LEN : 0;
    long long docs = 1;
    for (const char *sep; (sep = (const char *)memmem(text + pos, len - pos, EOT_TEXT, EOT_TEXT_LEN)); docs++)
        pos = (size_t)(sep - text) + EOT_TEXT_LEN;
    return docs;
}

static void run_input(char **inputs, int n_inputs, const char *prefix, double val_fraction, long long shard_tokens,
                      const char *tok_path, size_t chunk_bytes, int quiet) {
    Encoder e;
    memset(&e, 0, sizeof(e));
    e.chunk_bytes = chunk_bytes; e.quiet = quiet;
    // check every input before the slow part
    long long docs = 0;
    for (int i = 0; i < n_inputs; i++) {
        size_t len;
        const char *text = map_text(inputs[i], &len);
        e.bytes_total += len;
        docs += count_documents(text, len);
        munmap((void *)text, len);
    }
    // --val-fraction: every P-th document to val. With fewer than P documents (one undivided text,
    // say) none would go: then the last X of the tokens do instead (known only at the end, so the
    // whole input stays in memory: not with --shard-tokens, which refuses before writing anything).
    // Either way neither split is ever empty.
    ShardWriter train, val;
    char path[1100];
    // 1/X past what a count holds (X = 1e-300 or 5e-324) is a period no input reaches, never an overflow
    double inv = val_fraction > 0 ? 1.0 / val_fraction : 0;
    long long period = val_fraction <= 0 ? 0 : inv >= 9e18 ? LLONG_MAX : llround(inv);
    if (val_fraction > 0 && period < 2) period = 2;
    int split_tokens = val_fraction > 0 && docs < period;
    if (split_tokens && shard_tokens)
        fatal("%s: --val-fraction %g with --shard-tokens sends one document in %.4g to validation, and the input has %lld "
              "document%s (separated by %s): the validation split would be empty; without --shard-tokens the tokens are split instead",
              inputs[0], val_fraction, (double)period, docs, docs == 1 ? "" : "s", EOT_TEXT);
    if (!split_tokens && val_fraction > 0 && fabs(period * val_fraction - 1) > 1e-9)
        fprintf(stderr, "note: --val-fraction %g: one document in %lld goes to validation, a fraction of %.4g (documents are "
                "sent whole, one in round(1/X), at least one in 2)\n", val_fraction, period, 1.0 / period);
    if (val_fraction > 0) {
        snprintf(path, sizeof(path), "%s_train", prefix);
        writer_init(&train, path, shard_tokens, quiet);
        snprintf(path, sizeof(path), "%s_val", prefix);
        writer_init(&val, path, shard_tokens, quiet);
        e.val = &val;
        if (!split_tokens) e.val_period = period;
    } else writer_init(&train, prefix, shard_tokens, quiet);
    e.train = &train;
    tokenizer_init(&e.tok, tok_path);
    if (tokenizer_vocab_size(&e.tok) <= GPT2_EOT) fatal("%s: vocabulary of %d has no EOT token %d", tok_path, tokenizer_vocab_size(&e.tok), GPT2_EOT);
    e.t0 = e.last_report = wall_time();
    for (int i = 0; i < n_inputs; i++) {
        size_t len;
        const char *text = map_text(inputs[i], &len);
        encode_file(&e, text, len);
        munmap((void *)text, len);
    }
    double secs = wall_time() - e.t0;
    long long N = train.total + (e.val ? val.total : 0);
    if (!quiet)
        fprintf(stderr, "prepare_data: %d file(s), %.2f MB, %lld documents -> %lld tokens in %.2f s (%.1f MB/s, %.0f tokens/s)\n",
                n_inputs, e.bytes_total / 1e6, e.docs, N, secs, e.bytes_total / 1e6 / (secs > 0 ? secs : 1e-9), N / (secs > 0 ? secs : 1e-9));
    if (split_tokens) {   // too few documents: the last round(X * N) tokens (all still in train's buffer) to val
        long long nv = llround(val_fraction * N);
        if (nv < 1) {
            nv = 1;
            fprintf(stderr, "note: --val-fraction %g of %lld tokens rounds to none: 1 token goes to validation (no split is left empty)\n",
                    val_fraction, N);
        }
        if (nv >= N) fatal("--val-fraction %g leaves no training tokens out of %lld", val_fraction, N);
        int *tail = (int *)xmalloc(sizeof(int) * nv, "val tokens");
        for (long long i = 0; i < nv; i++) tail[i] = train.buf[N - nv + i];
        train.n -= nv; train.total -= nv;
        writer_push(&val, tail, (size_t)nv);
        free(tail);
    } else if (e.val && val.docs == 0)
        fatal("internal error: %lld documents and --val-fraction %g left the validation split empty", e.docs, val_fraction);
    writer_finish(&train);
    if (e.val) writer_finish(&val);
    tokenizer_free(&e.tok);
}

// ----------------------------------------------------------------------------
// encode / decode for tests

static void out_bytes(const void *p, size_t n) {
    if (n && fwrite(p, 1, n, stdout) != n) fatal("stdout: write failed (%s)", strerror(errno));
}

static void run_encode(const char *tok_path) {
    Tokenizer t;
    tokenizer_init(&t, tok_path);
    size_t len;
    char *text = read_stdin(&len);
    int *ids = NULL;
    size_t n = tokenizer_encode(&t, text, len, &ids);
    char line[16];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(line, sizeof(line), "%d\n", ids[i]);
        out_bytes(line, (size_t)k);
    }
    free(ids); free(text);
    tokenizer_free(&t);
}

static void run_decode(const char *tok_path) {
    Tokenizer t;
    tokenizer_init(&t, tok_path);
    size_t len;
    char *text = read_stdin(&len);
    char *p = text, *end = text + len;
    long long count = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',')) p++;
        if (p >= end) break;
        char *q = p;
        long v = 0;
        int digits = 0;
        while (q < end && *q >= '0' && *q <= '9' && digits < 10) { v = v * 10 + (*q - '0'); q++; digits++; }
        if (digits == 0 || (q < end && !(*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r' || *q == ',')))
            fatal("stdin: token %lld is not a non-negative integer", count + 1);
        if (v >= tokenizer_vocab_size(&t)) fatal("stdin: token id %ld out of range for vocabulary size %d", v, tokenizer_vocab_size(&t));
        size_t n;
        const unsigned char *b = tokenizer_decode(&t, (int)v, &n);
        out_bytes(b, n);
        count++;
        p = q;
    }
    free(text);
    tokenizer_free(&t);
}

static void run_decode_shard(const char *path, const char *tok_path) {
    Tokenizer t;
    tokenizer_init(&t, tok_path);
    Shard sh;
    shard_open(&sh, path);   // dataloader.h: the header checks, memory-mapped
    for (long long i = 0; i < sh.n; i++) {
        if (sh.tokens[i] >= tokenizer_vocab_size(&t)) fatal("%s: token %d at position %lld out of range", path, sh.tokens[i], i);
        size_t m;
        const unsigned char *b = tokenizer_decode(&t, sh.tokens[i], &m);
        out_bytes(b, m);
    }
    munmap(sh.map, sh.map_bytes);
    tokenizer_free(&t);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    const char *mode = NULL, *out = NULL, *tok_path = DEFAULT_TOKENIZER, *shard = NULL;
    const char *mk[3] = {0};
    char **inputs = (char **)xcalloc(sizeof(char *) * (argc + 1), "arguments");
    int n_inputs = 0, quiet = 0;
    double val_fraction = 0;
    size_t chunk_bytes = 1 << 20;
    long long shard_tokens = 0;
    if (argc < 2) { usage(stderr); return 2; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--encode") || !strcmp(a, "--decode")) {
            if (mode) fatal("%s: only one of --make-tokenizer, --input, --encode, --decode, --decode-shard", a);
            mode = a;
        } else if (!strcmp(a, "--make-tokenizer")) {
            if (mode) fatal("%s: only one of --make-tokenizer, --input, --encode, --decode, --decode-shard", a);
            if (i + 3 >= argc) fatal("--make-tokenizer: expected ENCODER_JSON VOCAB_BPE OUT.bin");
            mode = a; mk[0] = argv[i + 1]; mk[1] = argv[i + 2]; mk[2] = argv[i + 3]; i += 3;
        } else if (i + 1 >= argc) {
            fatal("%s: missing value (see --help)", a);
        } else if (!strcmp(a, "--input")) {
            if (mode && strcmp(mode, "--input")) fatal("--input: only one of --make-tokenizer, --input, --encode, --decode, --decode-shard");
            mode = "--input"; inputs[n_inputs++] = argv[++i];
        } else if (!strcmp(a, "--decode-shard")) {
            if (mode) fatal("%s: only one of --make-tokenizer, --input, --encode, --decode, --decode-shard", a);
            mode = a; shard = argv[++i];
        } else if (!strcmp(a, "--out")) out = argv[++i];
        else if (!strcmp(a, "--tokenizer")) tok_path = argv[++i];
        else if (!strcmp(a, "--val-fraction")) {
            char *e; val_fraction = strtod(argv[++i], &e);
            if (*e || e == argv[i] || !(val_fraction >= 0 && val_fraction < 1)) fatal("--val-fraction: expected a number in [0, 1), got '%s'", argv[i]);
        } else if (!strcmp(a, "--shard-tokens")) {
            char *e; long long v = strtoll(argv[++i], &e, 10);
            if (*e || e == argv[i] || v < 1 || v > 0x7fffffffLL) fatal("--shard-tokens: expected a token count in [1, 2147483647], got '%s'", argv[i]);
            shard_tokens = v;
        } else if (!strcmp(a, "--chunk-bytes")) {
            char *e; long long v = strtoll(argv[++i], &e, 10);
            if (*e || e == argv[i] || v < 1) fatal("--chunk-bytes: expected a positive integer, got '%s'", argv[i]);
            chunk_bytes = (size_t)v;
        } else fatal("unknown argument '%s' (see --help)", a);
    }
    if (!mode) fatal("nothing to do: give --make-tokenizer, --input, --encode, --decode or --decode-shard (see --help)");
    if (!strcmp(mode, "--make-tokenizer")) make_tokenizer(mk[0], mk[1], mk[2]);
    else if (!strcmp(mode, "--input")) {
        if (!out) fatal("--input: missing --out PREFIX");
        run_input(inputs, n_inputs, out, val_fraction, shard_tokens, tok_path, chunk_bytes, quiet);
    } else if (!strcmp(mode, "--encode")) run_encode(tok_path);
    else if (!strcmp(mode, "--decode")) run_decode(tok_path);
    else run_decode_shard(shard, tok_path);
    free(inputs);
    if (fflush(stdout) != 0) fatal("stdout: write failed (%s)", strerror(errno));
    return 0;
}
