// tests/dataloader_test.c: the batch order of dataloader.h, checked from the tokens themselves.
// The shards hold their own positions: the token at offset p of the files put end to end (in
// name order) is p, so every batch shows exactly which sequences it holds.
//   dataloader_test DIR         small shards under DIR: order, shards == one file, ranks, shuffle,
//                               tell/seek through the manifest JSON, old data_pos
//   dataloader_test --big DIR   two sparse shards of 1.5e9 tokens each (3e9 > 2^31 in all,
//                               about 6 GB apparent, a few KB on disk): reads around and beyond 2^31
//   dataloader_test --big-bad DIR  the same with token 60000 (>= V) at 2^31 + 5: must exit 1 with one line
// Prints one line per check; exits 1 if any fails. Built by `make build/dataloader_test`.
#include "dataloader.h"
#include <sys/stat.h>

static int fails = 0;
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  %s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fails += !ok;
}

// a shard whose token i is first + i
static void write_counting_shard(const char *path, long long first, long long n) {
    uint16_t *t = (uint16_t *)xmalloc(2 * n, "tokens");
    for (long long i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    shard_write(path, t, n);
    free(t);
}

typedef struct { int *in, *tg; } Batch;
static Batch batch_new(int B, int T) { Batch b = {(int *)xmalloc(4 * B * T, "in"), (int *)xmalloc(4 * B * T, "tg")}; return b; }
static void batch_free(Batch *b) { free(b->in); free(b->tg); }

// a loader's state through the manifest: tell, write JSON, print, parse, read
static DataState through_json(const DataLoader *d) {
    DataState s = dataloader_tell(d), r;
    cJSON *m = cJSON_CreateObject();
    data_state_write(m, &s);
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    cJSON *p = cJSON_Parse(text);
    free(text);
    char err[512];
    if (!data_state_read(p, &r, "manifest", err, sizeof(err))) fatal("%s", err);
    cJSON_Delete(p);
    return r;
}

// do the next n micro-steps of a and b give the same batches? (b may be a whole loader of a's world)
static int same_batches(DataLoader *a, DataLoader *b, int n) {
    int ok = 1, BT = a->B * a->T;
    Batch x = batch_new(a->B, a->T), y = batch_new(b->B, b->T);
    for (int i = 0; i < n; i++) {
        dataloader_next(a, x.in, x.tg);
        dataloader_next(b, y.in, y.tg);
        int off = b->B == a->B ? 0 : a->rank * BT;
        ok &= memcmp(x.in, y.in + off, 4 * BT) == 0 && memcmp(x.tg, y.tg + off, 4 * BT) == 0;
    }
    batch_free(&x); batch_free(&y);
    return ok;
}

static void small_tests(const char *dir) {
    // six shards of odd sizes (one shorter than a sequence), 59505 tokens, and the same tokens in one file
    static const long long SIZES[] = {7001, 3, 12000, 20000, 9500, 11001};
    char path[1200], shards[1024], whole[1024];
    snprintf(shards, sizeof(shards), "%s/shards", dir);
    mkdir(dir, 0755); mkdir(shards, 0755);
    long long N = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof(path), "%s/train_%06d.bin", shards, i);
        write_counting_shard(path, N, SIZES[i]);
        N += SIZES[i];
    }
    snprintf(whole, sizeof(whole), "%s/whole.bin", dir);
    write_counting_shard(whole, 0, N);
    const int V = 65535;

    // 1. order: shards == one file; sequences at multiples of T, epochs wrap
    {
        int B = 4, T = 32, steps = 2000;
        DataLoader a, b;
        dataloader_init(&a, shards, B, T, 0, 1, V, 0, 0);
        dataloader_init(&b, whole, B, T, 0, 1, V, 0, 0);
        long long per_epoch = ((N - 1) / T) / B;
        Batch x = batch_new(B, T), y = batch_new(B, T);
        int ok = 1, same = 1, crossed = 0;
        for (int k = 0; k < steps; k++) {
            dataloader_next(&a, x.in, x.tg);
            dataloader_next(&b, y.in, y.tg);
            same &= memcmp(x.in, y.in, 4 * B * T) == 0 && memcmp(x.tg, y.tg, 4 * B * T) == 0;
            for (int s = 0; s < B; s++) {
                long long start = ((k % per_epoch) * B + s) * T;
                for (int t = 0; t < T; t++) ok &= x.in[s * T + t] == (int)(start + t) && x.tg[s * T + t] == (int)(start + t + 1);
                long long edge = 0;   // does this sequence run across a shard boundary?
                for (int i = 0; i < 5; i++) { edge += SIZES[i]; crossed += start < edge && start + T >= edge; }
            }
        }
        check(a.n_shards == 6 && a.n_tokens == N, "%s: 6 shards, %lld tokens, one of them 3 tokens long", shards, a.n_tokens);
        check(ok, "%d micro-steps of 4 x 32 (%.1f epochs): sequence j is tokens 32j .. 32j+32 of the shards end to end; "
              "%d sequences ran across a shard boundary", steps, (double)steps / per_epoch, crossed);
        check(same, "the directory of 6 shards gives exactly the batches of the single file");
        DataLoader g;
        snprintf(path, sizeof(path), "%s/train_00000[0-5].bin", shards);
        dataloader_init(&g, path, B, T, 0, 1, V, 0, 0);
        dataloader_reset(&a);
        check(g.n_shards == 6 && same_batches(&g, &a, 700), "the glob %s names the same 6 shards in name order", path);
        dataloader_free(&g);
        batch_free(&x); batch_free(&y);
        dataloader_free(&a); dataloader_free(&b);
    }

    // 2. 3 ranks: disjoint sequences, together the whole loader's batch; shuffled, several epochs
    {
        int B = 2, T = 16, W = 3, steps = 3000;
        DataLoader r[3], w, plain;
        for (int i = 0; i < W; i++) dataloader_init(&r[i], shards, B, T, i, W, V, 1, 1234);
        dataloader_init(&w, shards, W * B, T, 0, 1, V, 1, 1234);
        dataloader_init(&plain, shards, W * B, T, 0, 1, V, 0, 0);
        long long n_seq = (N - 1) / T, per_epoch = n_seq / (W * B);
        unsigned char *seen = (unsigned char *)xcalloc(N, "seen");
        Batch x = batch_new(B, T), y = batch_new(W * B, T), z = batch_new(W * B, T);
        int rows_ok = 1, disjoint = 1, complete = 1, local = 1, epochs = 0, differs = 0, reshuffled = 0;
        int *first_order = (int *)xmalloc(sizeof(int) * per_epoch * W * B, "order"), *prev_order = (int *)xmalloc(sizeof(int) * per_epoch * W * B, "order");
        long long read_in_epoch = 0;
        int shard_changes = 0, last_shard = -1;
        for (int k = 0; k < steps; k++) {
            if (k % per_epoch == 0 && k > 0) {   // an epoch is complete: every sequence it could hold, once
                long long count = 0;
                for (long long p = 0; p < N; p++) count += seen[p];
                complete &= count == per_epoch * W * B && read_in_epoch == count;
                local &= shard_changes <= 5;
                if (epochs > 0) reshuffled |= memcmp(first_order, prev_order, sizeof(int) * per_epoch * W * B) != 0;
                memcpy(prev_order, first_order, sizeof(int) * per_epoch * W * B);
                memset(seen, 0, N);
                read_in_epoch = 0; shard_changes = 0; last_shard = -1;
                epochs++;
            }
            dataloader_next(&w, y.in, y.tg);
            dataloader_next(&plain, z.in, z.tg);
            differs |= memcmp(y.in, z.in, 4 * W * B * T) != 0;
            for (int i = 0; i < W; i++) {
                dataloader_next(&r[i], x.in, x.tg);
                rows_ok &= memcmp(x.in, y.in + i * B * T, 4 * B * T) == 0 && memcmp(x.tg, y.tg + i * B * T, 4 * B * T) == 0;
                for (int s = 0; s < B; s++) {
                    int p = x.in[s * T];   // where the sequence starts, in file order
                    if (seen[p]) disjoint = 0;
                    seen[p] = 1;
                    first_order[(k % per_epoch) * W * B + i * B + s] = p;
                    read_in_epoch++;
                    int sh = 0;
                    for (long long e = SIZES[0]; sh < 5 && p >= e; e += SIZES[++sh]) {}
                    if (sh != last_shard) { shard_changes += last_shard >= 0; last_shard = sh; }
                }
            }
        }
        check(rows_ok, "3 ranks x micro batch 2 read exactly the rows of 1 rank x micro batch 6, %d micro-steps, shuffled", steps);
        check(disjoint, "3 ranks read disjoint sequences: no sequence twice in an epoch, across ranks or within one");
        check(complete && epochs >= 3, "each of %d complete epochs reads %lld distinct sequences (%lld micro-steps x 6) of the %lld",
              epochs, per_epoch * W * B, per_epoch, n_seq);
        check(local, "shuffled, each epoch still reads shard after shard (at most 5 changes of shard per epoch)");
        check(differs && reshuffled, "--shuffle 1 changes the order, and every epoch has another order");
        DataLoader w2;   // the same seed gives the same order; another seed another
        dataloader_init(&w2, shards, W * B, T, 0, 1, V, 1, 1235);
        dataloader_reset(&w);
        Batch y2 = batch_new(W * B, T);
        dataloader_next(&w, y.in, y.tg);
        dataloader_next(&w2, y2.in, y2.tg);
        check(memcmp(y.in, y2.in, 4 * W * B * T) != 0, "another seed gives another order");
        dataloader_free(&w2); batch_free(&y2);
        free(seen); free(first_order); free(prev_order);
        batch_free(&x); batch_free(&y); batch_free(&z);
        for (int i = 0; i < W; i++) dataloader_free(&r[i]);
        dataloader_free(&w); dataloader_free(&plain);
    }

    // 3. tell / seek through the manifest JSON at many points (shard and epoch boundaries included):
    //    a loader seeked there continues exactly like the one that never stopped, and so does a
    //    loader of another world size with the same global micro batch
    {
        int B = 3, T = 16, W = 2, steps = 1300, look = 30;
        for (int shuffle = 0; shuffle <= 1; shuffle++) {
            DataLoader a;
            dataloader_init(&a, shards, B, T, 1, W, V, shuffle, 99);
            int BT = B * T;
            int *rec = (int *)xmalloc(sizeof(int) * (size_t)(steps + look) * BT, "record");
            DataState *st = (DataState *)xmalloc(sizeof(DataState) * steps, "states");
            Batch x = batch_new(B, T);
            for (int k = 0; k < steps + look; k++) {
                if (k < steps) st[k] = through_json(&a);
                dataloader_next(&a, x.in, x.tg);
                memcpy(rec + (size_t)k * BT, x.in, 4 * BT);
            }
            int ok = 1, ok_world = 1, tried = 0, shard_edges = 0, epoch_edges = 0;
            for (int k = 0; k < steps; k++) {
                int shard_edge = k > 0 && st[k].shard != st[k - 1].shard, epoch_edge = k > 0 && st[k].epoch != st[k - 1].epoch;
                shard_edges += shard_edge; epoch_edges += epoch_edge;
                if (!(shard_edge || epoch_edge || k % 97 == 0)) continue;
                DataLoader b, whole;
                dataloader_init(&b, shards, B, T, 1, W, V, shuffle, 99);
                dataloader_init(&whole, shards, W * B, T, 0, 1, V, shuffle, 99);
                dataloader_seek(&b, &st[k], "test");
                dataloader_seek(&whole, &st[k], "test");
                Batch y = batch_new(W * B, T);
                for (int i = 0; i < look; i++) {
                    dataloader_next(&b, x.in, x.tg);
                    dataloader_next(&whole, y.in, y.tg);
                    ok &= memcmp(x.in, rec + (size_t)(k + i) * BT, 4 * BT) == 0;
                    ok_world &= memcmp(y.in + BT, rec + (size_t)(k + i) * BT, 4 * BT) == 0;   // rank 1's rows
                }
                batch_free(&y);
                dataloader_free(&b); dataloader_free(&whole);
                tried++;
            }
            check(ok, "--shuffle %d: %d positions (%d shard and %d epoch boundaries) through the manifest JSON: "
                  "a loader seeked there reads the next %d batches of the one that never stopped", shuffle, tried, shard_edges, epoch_edges, look);
            check(ok_world, "--shuffle %d: a 1-rank loader with micro batch 6 seeked to a 2-rank position reads the same sequences", shuffle);
            check(shard_edges >= 5 && epoch_edges >= 2, "--shuffle %d: the positions include shard and epoch boundaries", shuffle);
            free(rec); free(st); batch_free(&x);
            dataloader_free(&a);
        }
    }

    // 4. an older checkpoint's data_pos (a token offset, before shards) resumes the same batches
    {
        int B = 4, T = 32;
        DataLoader a, b;
        dataloader_init(&a, whole, B, T, 0, 1, V, 0, 0);
        dataloader_init(&b, whole, B, T, 0, 1, V, 0, 0);
        Batch x = batch_new(B, T);
        for (int k = 0; k < 321; k++) dataloader_next(&a, x.in, x.tg);
        cJSON *m = cJSON_Parse("{\"data_pos\": 41088}");   // 321 micro-steps x 4 x 32
        DataState s;
        char err[512];
        int ok = data_state_read(m, &s, "old manifest", err, sizeof(err));
        cJSON_Delete(m);
        if (ok) dataloader_seek(&b, &s, "old manifest");
        check(ok && same_batches(&b, &a, 500), "an older manifest's \"data_pos\": 41088 continues with the same 500 batches (across an epoch end)");
        batch_free(&x);
        dataloader_free(&a); dataloader_free(&b);
    }
    (void)V;
}

// Two sparse shards of 1.5e9 tokens (the holes read as token 0): 3e9 tokens in all. Markers
// written around stream offset 2^31 (inside the second shard) must come back from a seek there,
// the position must survive the manifest JSON, and the epoch must end where 3e9 - 1 tokens end.
static void big_tests(const char *dir, int bad) {
    const long long n = 1500000000LL, N = 2 * n, P31 = 1LL << 31;
    const int T = 1024, V = 50257, M = 3000;
    char path[2][1200];
    mkdir(dir, 0755);
    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof(path[i]), "%s/big_%06d.bin", dir, i);
        int fd = open(path[i], O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ftruncate(fd, 1024 + 2 * n) != 0) fatal("%s: cannot create a sparse file (%s)", path[i], strerror(errno));
        int32_t h[SHARD_HEADER_INTS] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)n};
        uint16_t mark[M];
        for (int t = 0; t < M; t++) mark[t] = (uint16_t)(1 + t % 50000);
        if (bad) mark[1005] = 60000;   // out of range for V = 50257, at stream offset 2^31 + 5
        // markers at stream offsets 2^31 - 1000 .. 2^31 + 1999 (second shard) and at the first shard's end
        long long at = i == 1 ? P31 - 1000 - n : n - M;
        if (pwrite(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || pwrite(fd, mark, sizeof(mark), 1024 + 2 * at) != (ssize_t)sizeof(mark))
            fatal("%s: write failed", path[i]);
        close(fd);
    }
    struct stat sb;
    stat(path[1], &sb);
    printf("  two sparse shards of %lld tokens: %lld bytes each, %lld bytes on disk\n", n, (long long)sb.st_size, (long long)sb.st_blocks * 512);
    DataLoader d;
    dataloader_init(&d, dir, 1, T, 0, 1, V, 0, 0);
    check(d.n_tokens == N && d.n_seq == (N - 1) / T && d.check_batches,
          "%lld tokens (> 2^31) in 2 shards, %lld sequences of %d; too many to scan at open: each batch is checked", d.n_tokens, d.n_seq, T);
    // the sequence that starts at stream offset 2^31 (2^31 is a multiple of 1024)
    DataState s = dataloader_tell(&d);
    s.shard = 1;
    s.offset = P31 / T - d.first[1];
    dataloader_seek(&d, &s, "test");
    Batch x = batch_new(1, T);
    dataloader_next(&d, x.in, x.tg);   // with `bad`, a one-line error naming the file and exit 1
    if (bad) { check(0, "token 60000 was not rejected"); return; }
    int ok = 1;
    for (int t = 0; t < T; t++) ok &= x.in[t] == 1 + (1000 + t) % 50000 && x.tg[t] == 1 + (1001 + t) % 50000;
    check(ok, "the sequence at stream offset 2^31 = shard 1 offset %lld sequences holds the markers written at byte %lld of %s",
          s.offset, 1024 + 2 * (P31 - n), path[1]);
    DataState a = through_json(&d);
    check(a.shard == 1 && a.offset == s.offset + 1 && a.n_tokens == N, "tell after it: shard 1, offset %lld, %lld tokens (through the JSON)", a.offset, a.n_tokens);
    // the sequence that ends the first shard runs into the second
    s.shard = 0;
    s.offset = (n - 1) / T;   // its first token is in shard 0, its last in shard 1
    dataloader_seek(&d, &s, "test");
    dataloader_next(&d, x.in, x.tg);
    long long st = s.offset * T;
    ok = 1;
    for (int t = 0; t < T; t++) {
        long long p = st + t, q = p + 1;
        int want_in = p < n && p >= n - M ? 1 + (int)((p - (n - M)) % 50000) : 0;
        int want_tg = q < n && q >= n - M ? 1 + (int)((q - (n - M)) % 50000) : 0;
        ok &= x.in[t] == want_in && x.tg[t] == want_tg;
    }
    check(ok && st + T > n, "the sequence at %lld runs across the boundary at %lld: markers then the second shard's zeros", st, n);
    // the last sequence of the epoch, then the first of the next
    s.offset = d.n_seq - 1 - d.first[1];
    s.shard = 1;
    dataloader_seek(&d, &s, "test");
    dataloader_next(&d, x.in, x.tg);
    DataState e = dataloader_tell(&d);
    dataloader_next(&d, x.in, x.tg);
    DataState f = dataloader_tell(&d);
    check(e.epoch == 0 && f.epoch == 1 && f.shard == 0 && f.offset == 1,
          "after sequence %lld (the last whole one of %lld tokens) the next epoch starts at shard 0", d.n_seq - 1, N);
    batch_free(&x);
    dataloader_free(&d);
    // shuffled: the permutation of a 1.46M-sequence shard, and a position beyond 2^31 through the JSON
    dataloader_init(&d, dir, 4, T, 0, 1, V, 1, 5);
    x = batch_new(4, T);
    for (int i = 0; i < 3; i++) dataloader_next(&d, x.in, x.tg);
    DataState g = through_json(&d);
    DataLoader c;
    dataloader_init(&c, dir, 4, T, 0, 1, V, 1, 5);
    dataloader_seek(&c, &g, "test");
    check(same_batches(&c, &d, 20) && g.offset == 12, "shuffled: shard %lld (%s) offset %lld through the JSON, the next 20 batches agree",
          g.shard, g.shard_file, g.offset);
    batch_free(&x);
    dataloader_free(&c); dataloader_free(&d);
    for (int i = 0; i < 2; i++) unlink(path[i]);
}

int main(int argc, char **argv) {
    if (argc == 2) small_tests(argv[1]);
    else if (argc == 3 && !strcmp(argv[1], "--big")) big_tests(argv[2], 0);
    else if (argc == 3 && !strcmp(argv[1], "--big-bad")) big_tests(argv[2], 1);
    else { fprintf(stderr, "usage: dataloader_test DIR | --big DIR | --big-bad DIR\n"); return 2; }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
