// dataloader.h: token shards (memory-mapped) and the deterministic batch order.
//
// Shard format (llm.c compatible): a header of 256 little-endian int32,
//   [0] magic 20240520, [1] version 1, [2] number of tokens N, rest zero,
// followed by N uint16 token ids. N is read as unsigned (a shard holds < 2^32
// tokens); the data set as a whole may hold any number (64-bit positions).
//
// Which files: --train / --val name one shard, a directory (every *.bin in it)
// or a glob pattern ("data/fineweb/train_*.bin"); the files are sorted by name.
// Each is memory-mapped, never read into memory: the page cache holds what is
// being read, and every rank of a node shares it.
//
// Batch order. One epoch is one pass over the token stream made by putting the
// shards one after another (in name order, or in a shuffled order). The stream
// is cut into sequences at multiples of T: sequence j is tokens jT .. jT+T
// (T inputs and, shifted by one, T targets), so an epoch of N tokens holds
// (N - 1) / T sequences; a sequence may run across a shard boundary, and the
// way the data is cut into shards does not change what is read. Sequence j
// belongs to the shard its first token lies in. The epoch's list of sequences
// is the shards' sequences, shard after shard, each shard's in order or, with
// --shuffle 1, in a seeded permutation.
//
// One micro-step of the whole job consumes the next world * B entries of the
// list; rank r takes entries r*B .. r*B+B-1, so N ranks with micro batch B read
// exactly the sequences one rank with micro batch N*B reads (and the ranks of a
// micro-step read disjoint sequences). When fewer than world * B entries are
// left the next epoch begins (new shuffle). With one shard and no shuffling
// this is the plain front-to-back order of llm.c (and of zeroc before shards).
//
// Shuffling (--shuffle 1, seeded by --seed; llm.c's dataloader.h does the
// same two permutations): each epoch permutes the shard order, and each shard's
// sequences, with Fisher-Yates driven by splitmix64 (util/common.h) seeded from
// (seed, epoch, shard). The order depends on the data and on world * B only,
// never on the world size alone. Memory: one uint32 per sequence of the shard
// being read.
//
// Position (DataState, stored in the checkpoint manifest): the epoch, the shard
// (index into that epoch's order) and the number of that shard's sequences
// already read, plus the shuffle setting and seed; a resumed run recomputes the
// permutations and continues with the same batches. scripts/train_gpt.py
// implements the same order.
#pragma once
#include "util/common.h"
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <glob.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
// data sets up to this many tokens have every token id checked when they are
// opened (about a second per 2^30 tokens); larger ones are checked batch by batch
#define DATA_SCAN_MAX_TOKENS (1LL << 30)

typedef struct {
    char path[512];
    void *map;                 // the whole file, read-only
    size_t map_bytes;
    const uint16_t *tokens;    // map + the header
    long long n;               // tokens
} Shard;

// The loader's position and shuffle state: what a checkpoint records.
typedef struct {
    long long epoch;           // passes over the data completed
    long long shard;           // index into the epoch's shard order
    long long offset;          // sequences of that shard already read
    int shuffle;               // --shuffle
    uint64_t seed;             // shuffle seed (--seed)
    // the data it refers to, checked on resume
    int seq_len;               // T
    long long n_shards, n_tokens;
    char shard_file[512];      // the name of the file at `shard` (for people reading the manifest)
    long long legacy_tokens;   // >= 0: an old checkpoint's "data_pos" (a token offset, no shards)
} DataState;

typedef struct {
    char spec[512];            // what --train / --val said
    Shard *shards;
    int n_shards;
    long long n_tokens;        // all shards
    int B, T, rank, world, vocab_size;
    int shuffle;
    uint64_t seed;
    long long n_seq;           // sequences per epoch: (n_tokens - 1) / T
    int check_batches;         // token ids not scanned at open: check each batch
    // this epoch's layout
    long long epoch;
    int *order;                // order[k]: the shard read k-th
    long long *start;          // start[k]: stream offset of order[k]; start[n_shards] = n_tokens
    long long *first;          // first[k]: first sequence of order[k]; first[n_shards] = n_seq
    long long next;            // next micro-step's first entry of the epoch's list
    // the permutation of one shard's sequences (shuffle), for (perm_epoch, perm_k)
    uint32_t *perm;
    long long perm_cap, perm_epoch;
    int perm_k;
    uint16_t *buf;             // T + 1 tokens
} DataLoader;

// ----------------------------------------------------------------------------
// opening shards

static int shard_name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The files a --train / --val value names, sorted by name. *n_out files; the
// caller frees each name and the array.
static char **data_files(const char *spec, int *n_out) {
    char **names = NULL;
    int n = 0;
    struct stat sb;
    if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        DIR *dir = opendir(spec);
        if (!dir) fatal("%s: cannot open directory (%s)", spec, strerror(errno));
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 4, ".bin") != 0 || e->d_name[0] == '.') continue;
            names = (char **)realloc(names, sizeof(char *) * (n + 1));
            size_t plen = strlen(spec) + len + 2;
            names[n] = (char *)xmalloc(plen, "shard name");
            snprintf(names[n++], plen, "%s/%s", spec, e->d_name);
        }
        closedir(dir);
        if (n == 0) fatal("%s: directory holds no .bin token shards", spec);
    } else if (strpbrk(spec, "*?[")) {
        glob_t g;
        int rc = glob(spec, GLOB_NOSORT, NULL, &g);
        if (rc == GLOB_NOMATCH) fatal("%s: no file matches the pattern", spec);
        if (rc != 0) fatal("%s: cannot expand the pattern", spec);
        n = (int)g.gl_pathc;
        names = (char **)xmalloc(sizeof(char *) * n, "shard names");
        for (int i = 0; i < n; i++) names[i] = strdup(g.gl_pathv[i]);
        globfree(&g);
    } else {
        names = (char **)xmalloc(sizeof(char *), "shard name");
        names[n++] = strdup(spec);
    }
    qsort(names, n, sizeof(char *), shard_name_cmp);   // byte order, independent of the locale
    *n_out = n;
    return names;
}

// A shard's header against the file's size (bytes): the token count, or -1 with a
// one-line err naming the file. (tests/fuzz/ fuzzes it with shard_find_bad_token.)
static long long shard_parse_header(const char *path, const int32_t header[SHARD_HEADER_INTS], long long size, char *err, size_t errn) {
    long long hb = SHARD_HEADER_INTS * 4;
    if (size < hb) { snprintf(err, errn, "%s: truncated file: %lld bytes is shorter than the %lld-byte header", path, size, hb); return -1; }
    if (header[0] != SHARD_MAGIC) {
        snprintf(err, errn, "%s: bad magic number %d (expected %d): not a zeroc/llm.c token shard (text becomes one with "
                 "scripts/prepare_data.sh --input %s --out PREFIX)", path, header[0], SHARD_MAGIC, path);
        return -1;
    }
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

// What to do about a shard that is not there: under data/brown/, `make data` if the corpus
// is not prepared; if it is, the path is mistyped, and the folder's shards are named.
static const char *shard_missing_hint(const char *path) {
    if (strncmp(path, "data/brown/", 11) != 0) return "";
    if (access("data/brown/train.bin", R_OK) != 0) return ": run `make data` to prepare the Brown corpus";
    return ": the Brown corpus is prepared, as data/brown/train.bin and data/brown/val.bin";
}

// Maps one shard and checks its header. Every problem is a one-line error naming the file.
static void shard_open(Shard *s, const char *path) {
    memset(s, 0, sizeof(*s));
    if (strlen(path) >= sizeof(s->path)) fatal("%s: path too long", path);
    strcpy(s->path, path);
    char err[1200];
    int fd = open_regular(path, O_RDONLY, "a token shard (a regular file, or a directory of them)", err, sizeof(err));
    if (fd < 0) fatal("%s%s", err, errno == ENOENT ? shard_missing_hint(path) : "");
    struct stat sb;
    if (fstat(fd, &sb) != 0) fatal("%s: cannot stat (%s)", path, strerror(errno));
    long long size = (long long)sb.st_size;
    int32_t header[SHARD_HEADER_INTS] = {0};
    if (size >= (long long)sizeof(header) && pread(fd, header, sizeof(header), 0) != (ssize_t)sizeof(header))
        fatal("%s: cannot read the header (%s)", path, strerror(errno));
    long long n = shard_parse_header(path, header, size, err, sizeof(err));
    if (n < 0) fatal("%s", err);
    s->map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (s->map == MAP_FAILED) fatal("%s: cannot memory-map %lld bytes (%s)", path, size, strerror(errno));
    close(fd);
    s->map_bytes = (size_t)size;
    s->tokens = (const uint16_t *)((const char *)s->map + sizeof(header));
    s->n = n;
}

static void shard_check_tokens(const Shard *s, long long lo, long long hi, int vocab_size) {
    long long bad = shard_find_bad_token(s->tokens + lo, hi - lo, vocab_size);
    if (bad >= 0) fatal("%s: token id %d at position %lld is out of range for vocabulary size %d", s->path, s->tokens[lo + bad], lo + bad, vocab_size);
}

// ----------------------------------------------------------------------------
// the epoch's order

// the seeded stream of one permutation: (seed, epoch, what), what = -1 for the shard order
static Rng data_rng(uint64_t seed, long long epoch, long long what) {
    Rng r = {seed};
    r.state = rng_u64(&r) ^ (uint64_t)epoch;
    r.state = rng_u64(&r) ^ (uint64_t)(what + 1);
    return r;
}

// Fisher-Yates (Durstenfeld), from the top: swap a[i] with a[rng % (i + 1)]
static void data_permute(uint32_t *a, long long n, Rng *r) {
    for (long long i = 0; i < n; i++) a[i] = (uint32_t)i;
    for (long long i = n - 1; i > 0; i--) {
        long long j = (long long)(rng_u64(r) % (uint64_t)(i + 1));
        uint32_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

static void data_epoch_layout(DataLoader *d, long long epoch) {
    int K = d->n_shards;
    d->epoch = epoch;
    uint32_t *o = (uint32_t *)xmalloc(sizeof(uint32_t) * K, "shard order");
    Rng r = data_rng(d->seed, epoch, -1);
    if (d->shuffle) data_permute(o, K, &r);
    else for (int k = 0; k < K; k++) o[k] = (uint32_t)k;
    long long s = 0;
    for (int k = 0; k < K; k++) {
        d->order[k] = (int)o[k];
        d->start[k] = s;
        long long f = (s + d->T - 1) / d->T;                 // first multiple of T at or after s
        d->first[k] = f < d->n_seq ? f : d->n_seq;
        s += d->shards[o[k]].n;
    }
    d->start[K] = s;
    d->first[K] = d->n_seq;
    d->perm_k = -1;
    free(o);
}

// the group (position in the epoch's order) that holds entry e of the epoch's list
static int data_group_of(const DataLoader *d, long long e) {
    int lo = 0, hi = d->n_shards - 1;   // the last k with first[k] <= e
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->first[mid] <= e) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// entry e of the epoch's list -> the sequence it names; *group: its shard's position k
static long long data_sequence_of(DataLoader *d, long long e, int *group) {
    int k = data_group_of(d, e);
    *group = k;
    long long i = e - d->first[k];
    if (!d->shuffle) return e;
    if (d->perm_k != k || d->perm_epoch != d->epoch) {
        long long m = d->first[k + 1] - d->first[k];
        if (m > d->perm_cap) {
            free(d->perm);
            d->perm = (uint32_t *)xmalloc(sizeof(uint32_t) * m, "sequence permutation");
            d->perm_cap = m;
        }
        Rng r = data_rng(d->seed, d->epoch, d->order[k]);
        data_permute(d->perm, m, &r);
        d->perm_k = k; d->perm_epoch = d->epoch;
    }
    return d->first[k] + d->perm[i];
}

// T + 1 tokens of sequence j (in group k) into d->buf, across shard boundaries
static void data_read_sequence(DataLoader *d, long long j, int k) {
    long long off = j * d->T - d->start[k], need = d->T + 1;
    uint16_t *dst = d->buf;
    while (need > 0) {
        const Shard *s = &d->shards[d->order[k]];
        long long take = s->n - off < need ? s->n - off : need;
        if (take > 0) {
            if (d->check_batches) shard_check_tokens(s, off, off + take, d->vocab_size);
            memcpy(dst, s->tokens + off, sizeof(uint16_t) * take);
            dst += take; need -= take;
        }
        k++; off = 0;
    }
}

// ----------------------------------------------------------------------------
// the loader

// Opens the shards `spec` names. shuffle: 0 or 1 (seeded by seed).
static void dataloader_init(DataLoader *d, const char *spec, int B, int T, int rank, int world, int vocab_size,
                            int shuffle, uint64_t seed) {
    memset(d, 0, sizeof(*d));
    if (strlen(spec) >= sizeof(d->spec)) fatal("%s: path too long", spec);
    strcpy(d->spec, spec);
    d->B = B; d->T = T; d->rank = rank; d->world = world; d->vocab_size = vocab_size;
    d->shuffle = shuffle; d->seed = seed;
    char **names = data_files(spec, &d->n_shards);
    int K = d->n_shards;
    d->shards = (Shard *)xcalloc(sizeof(Shard) * K, "shards");
    for (int i = 0; i < K; i++) {
        shard_open(&d->shards[i], names[i]);
        d->n_tokens += d->shards[i].n;
        free(names[i]);
    }
    free(names);
    long long need = (long long)world * B * T + 1;
    if (d->n_tokens < need)
        fatal("%s: %lld tokens%s is too few for one micro-step of %d ranks x %d sequences x %d tokens (+1)",
              spec, d->n_tokens, K > 1 ? " in all shards" : "", world, B, T);
    d->n_seq = (d->n_tokens - 1) / T;
    if (d->n_tokens <= DATA_SCAN_MAX_TOKENS)
        for (int i = 0; i < K; i++) shard_check_tokens(&d->shards[i], 0, d->shards[i].n, vocab_size);
    else d->check_batches = 1;
    d->order = (int *)xmalloc(sizeof(int) * K, "shard order");
    d->start = (long long *)xmalloc(sizeof(long long) * (K + 1), "shard starts");
    d->first = (long long *)xmalloc(sizeof(long long) * (K + 1), "shard sequences");
    d->buf = (uint16_t *)xmalloc(sizeof(uint16_t) * (T + 1), "sequence");
    data_epoch_layout(d, 0);
}

// Fills this rank's inputs and targets (B*T each) and advances the global position.
static void dataloader_next(DataLoader *d, int *inputs, int *targets) {
    long long stride = (long long)d->world * d->B;
    if (d->next + stride > d->n_seq) {   // the epoch is over: the next one, reshuffled
        data_epoch_layout(d, d->epoch + 1);
        d->next = 0;
    }
    for (int b = 0; b < d->B; b++) {
        int k;
        long long j = data_sequence_of(d, d->next + (long long)d->rank * d->B + b, &k);
        data_read_sequence(d, j, k);
        for (int t = 0; t < d->T; t++) {
            inputs[b * d->T + t] = d->buf[t];
            targets[b * d->T + t] = d->buf[t + 1];
        }
    }
    d->next += stride;
}

// back to the start of the first epoch (validation reads the same batches every time)
static void dataloader_reset(DataLoader *d) {
    if (d->epoch != 0) data_epoch_layout(d, 0);
    d->next = 0;
}

// What the loader opened, for the start-up: "PATH: 1 shard, N tokens, S sequences of T per epoch";
// for a directory or a glob, how many shards it matched, the first and the last. The micro-steps
// of an epoch: its sequences over the world * B that each micro-step reads.
static long long dataloader_micro_steps_per_epoch(const DataLoader *d) { return d->n_seq / ((long long)d->world * d->B); }
static void dataloader_describe(const DataLoader *d, char *out, size_t n) {
    const char *first = d->shards[0].path, *last = d->shards[d->n_shards - 1].path;
    const char *f = strrchr(first, '/'), *l = strrchr(last, '/');
    char shards[400];
    if (d->n_shards == 1 && !strcmp(first, d->spec)) snprintf(shards, sizeof(shards), "1 shard");
    else if (d->n_shards == 1) snprintf(shards, sizeof(shards), "1 shard (%.300s)", f ? f + 1 : first);
    else snprintf(shards, sizeof(shards), "%d shards (%.150s ... %.150s)", d->n_shards, f ? f + 1 : first, l ? l + 1 : last);
    snprintf(out, n, "%.600s: %s, %lld tokens, %lld sequences of %d per epoch", d->spec, shards, d->n_tokens, d->n_seq, d->T);
}

static void dataloader_free(DataLoader *d) {
    for (int i = 0; i < d->n_shards; i++) munmap(d->shards[i].map, d->shards[i].map_bytes);
    free(d->shards); free(d->order); free(d->start); free(d->first); free(d->perm); free(d->buf);
    memset(d, 0, sizeof(*d));
}

// ----------------------------------------------------------------------------
// position: tell, seek, and the checkpoint manifest

static DataState dataloader_tell(const DataLoader *d) {
    DataState s;
    memset(&s, 0, sizeof(s));
    s.epoch = d->epoch;
    s.shard = data_group_of(d, d->next);
    s.offset = d->next - d->first[s.shard];
    s.shuffle = d->shuffle; s.seed = d->seed; s.seq_len = d->T;
    s.n_shards = d->n_shards; s.n_tokens = d->n_tokens;
    const char *path = d->shards[d->order[s.shard]].path, *slash = strrchr(path, '/');
    snprintf(s.shard_file, sizeof(s.shard_file), "%s", slash ? slash + 1 : path);
    s.legacy_tokens = -1;
    return s;
}

// Continues from a recorded position; the data and the order must be the ones it was recorded with.
static void dataloader_seek(DataLoader *d, const DataState *s, const char *from) {
    if (s->legacy_tokens >= 0) {   // before shards: a token offset into one shard, never shuffled
        if (d->shuffle || s->legacy_tokens % d->T)
            fatal("%s: data_pos %lld (an older checkpoint) needs --shuffle 0 and a --seq dividing it", from, s->legacy_tokens);
        if (s->legacy_tokens / d->T > d->n_seq) fatal("%s: data_pos %lld is beyond the %lld tokens of %s", from, s->legacy_tokens, d->n_tokens, d->spec);
        data_epoch_layout(d, 0);
        d->next = s->legacy_tokens / d->T;
        return;
    }
    if (s->seq_len != d->T) fatal("%s: the data position counts sequences of %d tokens; this run has --seq %d", from, s->seq_len, d->T);
    if (s->n_shards != d->n_shards || s->n_tokens != d->n_tokens)
        fatal("%s: the checkpoint read %lld shards / %lld tokens; %s has %d shards / %lld tokens (resume needs the same data)",
              from, s->n_shards, s->n_tokens, d->spec, d->n_shards, d->n_tokens);
    if (s->shuffle != d->shuffle || (s->shuffle && s->seed != d->seed))
        fatal("%s: the checkpoint's data order is --shuffle %d (seed %llu); this run asks for --shuffle %d (seed %llu)",
              from, s->shuffle, (unsigned long long)s->seed, d->shuffle, (unsigned long long)d->seed);
    if (s->epoch < 0 || s->shard < 0 || s->shard >= d->n_shards || s->offset < 0) fatal("%s: malformed data position", from);
    data_epoch_layout(d, s->epoch);
    long long e = d->first[s->shard] + s->offset;
    if (e > d->first[s->shard + 1]) fatal("%s: data offset %lld is beyond shard %lld's sequences", from, s->offset, s->shard);
    d->next = e;
}

static void data_state_write(cJSON *manifest, const DataState *s) {
    cJSON *o = cJSON_AddObjectToObject(manifest, "data");
    cJSON_AddNumberToObject(o, "epoch", (double)s->epoch);
    cJSON_AddNumberToObject(o, "shard", (double)s->shard);
    cJSON_AddStringToObject(o, "shard_file", s->shard_file);
    cJSON_AddNumberToObject(o, "offset", (double)s->offset);
    cJSON_AddNumberToObject(o, "shuffle", s->shuffle);
    char seed[32];
    snprintf(seed, sizeof(seed), "%016llx", (unsigned long long)s->seed);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON_AddNumberToObject(o, "seq_len", s->seq_len);
    cJSON_AddNumberToObject(o, "shards", (double)s->n_shards);
    cJSON_AddNumberToObject(o, "tokens", (double)s->n_tokens);
}

// Reads "data" (or an older checkpoint's "data_pos"). Returns 1, or 0 with a one-line err.
static int data_state_read(const cJSON *manifest, DataState *s, const char *path, char *err, size_t errn) {
    memset(s, 0, sizeof(*s));
    s->legacy_tokens = -1;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(manifest, "data");
    if (!o) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(manifest, "data_pos");
        if (!cJSON_IsNumber(p) || p->valuedouble < 0) { snprintf(err, errn, "%s: no data position (\"data\")", path); return 0; }
        s->legacy_tokens = (long long)p->valuedouble;
        return 1;
    }
    static const char *NUM[] = {"epoch", "shard", "offset", "shuffle", "seq_len", "shards", "tokens"};
    double v[7];
    for (int i = 0; i < 7; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, NUM[i]);
        if (!cJSON_IsNumber(j) || j->valuedouble < 0) { snprintf(err, errn, "%s: data.%s is missing or not a count", path, NUM[i]); return 0; }
        v[i] = j->valuedouble;
    }
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed"), *file = cJSON_GetObjectItemCaseSensitive(o, "shard_file");
    if (!cJSON_IsString(seed)) { snprintf(err, errn, "%s: data.seed is missing", path); return 0; }
    s->epoch = (long long)v[0]; s->shard = (long long)v[1]; s->offset = (long long)v[2]; s->shuffle = (int)v[3];
    s->seq_len = (int)v[4]; s->n_shards = (long long)v[5]; s->n_tokens = (long long)v[6];
    s->seed = strtoull(seed->valuestring, NULL, 16);
    if (cJSON_IsString(file)) snprintf(s->shard_file, sizeof(s->shard_file), "%s", file->valuestring);
    return 1;
}

// What identifies the train data a checkpoint's position points into, cheaply
// at any size: a CRC-32 over the shard count, each shard's token count and its
// first and last 4096 tokens (a resume refuses other data, train/checkpoint.h).
static uint32_t dataloader_fingerprint(const DataLoader *d) {
    uint32_t crc = crc32_update(0, &d->n_shards, sizeof(d->n_shards));
    for (int i = 0; i < d->n_shards; i++) {
        const Shard *s = &d->shards[i];
        long long k = s->n < 4096 ? s->n : 4096;
        crc = crc32_update(crc, &s->n, sizeof(s->n));
        crc = crc32_update(crc, s->tokens, 2 * (size_t)k);
        crc = crc32_update(crc, s->tokens + (s->n - k), 2 * (size_t)k);
    }
    return crc;
}

// ----------------------------------------------------------------------------

// Writes a shard (used by the data tools and the tests).
static void shard_write(const char *path, const uint16_t *tokens, long long n) {
    if (n < 0 || n > 0xFFFFFFFFLL) fatal("%s: %lld tokens do not fit in one shard (at most 2^32 - 1)", path, n);
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC; header[1] = SHARD_VERSION; header[2] = (int32_t)(uint32_t)n;
    AtomicFile a = atomic_open(path);
    fwrite_or_die(header, sizeof(header), 1, a.f, a.tmp);
    fwrite_or_die(tokens, 2, n, a.f, a.tmp);
    atomic_commit(&a);
}
