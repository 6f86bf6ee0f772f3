// dataloader.h: token shards and the deterministic batch order.
//
// Shard format (llm.c compatible): a header of 256 little-endian int32,
//   [0] magic 20240520, [1] version 1, [2] number of tokens N, rest zero,
// followed by N uint16 token ids.
//
// Batch order: the data is read front to back with no shuffling. One
// micro-step of the whole job consumes world * B sequences of T tokens
// (plus one target token) starting at `pos`; rank r takes the sequences
// r*B .. r*B+B-1, so N ranks with micro batch B read exactly the sequences
// one rank with micro batch N*B reads. Then pos += world*B*T, and when the
// next micro-step would run past the end, pos wraps to 0. The PyTorch
// reference implements the same order (scripts/train_gpt.py).
#pragma once
#include "common.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

typedef struct {
    char path[512];
    uint16_t *tokens;
    long long n_tokens;
    int B, T, rank, world;
    long long pos;          // start of the next micro-step's global chunk
} DataLoader;

// A shard's header against the file's size (bytes): the token count, or -1 with a
// one-line err naming the file. (tests/fuzz/ fuzzes it with shard_find_bad_token.)
static long long shard_parse_header(const char *path, const int32_t header[SHARD_HEADER_INTS], long long size, char *err, size_t errn) {
    long long hb = SHARD_HEADER_INTS * 4;
    if (size < hb) { snprintf(err, errn, "%s: truncated file: %lld bytes is shorter than the %lld-byte header", path, size, hb); return -1; }
    if (header[0] != SHARD_MAGIC) { snprintf(err, errn, "%s: bad magic number %d (expected %d): not a zeroc/llm.c token shard", path, header[0], SHARD_MAGIC); return -1; }
    if (header[1] != SHARD_VERSION) { snprintf(err, errn, "%s: unsupported shard version %d (expected %d)", path, header[1], SHARD_VERSION); return -1; }
    long long n = (uint32_t)header[2];
    long long expect = hb + 2 * n;
    if (size < expect) { snprintf(err, errn, "%s: truncated file: header says %lld tokens (%lld bytes) but the file has %lld bytes", path, n, expect, size); return -1; }
    if (size > expect) { snprintf(err, errn, "%s: %lld trailing bytes after %lld tokens", path, size - expect, n); return -1; }
    return n;
}

// the position of the first token id >= vocab_size, or -1
static long long shard_find_bad_token(const uint16_t *tokens, long long n, int vocab_size) {
    for (long long i = 0; i < n; i++) if (tokens[i] >= vocab_size) return i;
    return -1;
}

// Reads and validates a whole shard. Every problem is a one-line error naming the file.
static void dataloader_init(DataLoader *d, const char *path, int B, int T, int rank, int world, int vocab_size) {
    memset(d, 0, sizeof(*d));
    snprintf(d->path, sizeof(d->path), "%s", path);
    d->B = B; d->T = T; d->rank = rank; d->world = world;
    FILE *f = fopen(path, "rb");
    if (!f) fatal("%s: cannot open (%s)%s", path, strerror(errno),
                  strncmp(path, "data/brown/", 11) == 0 ? ": run `make data` to prepare the Brown corpus" : "");
    long long size = file_size_or_die(f, path);
    int32_t header[SHARD_HEADER_INTS] = {0};
    char err[1024];
    if (size >= (long long)sizeof(header)) fread_or_die(header, sizeof(int32_t), SHARD_HEADER_INTS, f, path, "header");
    long long n = shard_parse_header(path, header, size, err, sizeof(err));
    if (n < 0) fatal("%s", err);
    long long need = (long long)world * B * T + 1;
    if (n < need) fatal("%s: %lld tokens is too few for one micro-step of %d ranks x %d sequences x %d tokens (+1)", path, n, world, B, T);
    d->tokens = (uint16_t *)xmalloc(2 * n, "token shard");
    fread_or_die(d->tokens, 2, n, f, path, "tokens");
    fclose(f);
    long long bad = shard_find_bad_token(d->tokens, n, vocab_size);
    if (bad >= 0) fatal("%s: token id %d at position %lld is out of range for vocabulary size %d", path, d->tokens[bad], bad, vocab_size);
    d->n_tokens = n;
}

// Fills this rank's inputs and targets (B*T each) and advances the global position.
static void dataloader_next(DataLoader *d, int *inputs, int *targets) {
    long long stride = (long long)d->world * d->B * d->T;
    if (d->pos + stride + 1 > d->n_tokens) d->pos = 0;
    const uint16_t *src = d->tokens + d->pos + (long long)d->rank * d->B * d->T;
    for (long long i = 0; i < (long long)d->B * d->T; i++) {
        inputs[i] = src[i];
        targets[i] = src[i + 1];
    }
    d->pos += stride;
}

static void dataloader_reset(DataLoader *d) { d->pos = 0; }

static void dataloader_free(DataLoader *d) { free(d->tokens); d->tokens = NULL; }

// Writes a shard (used by the data tools and the tests).
static void shard_write(const char *path, const uint16_t *tokens, long long n) {
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC; header[1] = SHARD_VERSION; header[2] = (int32_t)n;
    AtomicFile a = atomic_open(path);
    fwrite_or_die(header, sizeof(header), 1, a.f, a.tmp);
    fwrite_or_die(tokens, 2, n, a.f, a.tmp);
    atomic_commit(&a);
}
