// formats/tfevents.h: TensorBoard's event files, written and read back without
// TensorFlow or a protocol-buffer library. train/monitor.h writes the training's
// scalars with it; TensorBoard, `wandb sync --sync-tensorboard` and PyTorch's
// SummaryWriter all read and write this same format.
//
// An event file is a sequence of TFRecords (tensorflow/core/lib/io/record_writer.cc):
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C
//   of the data; every integer little-endian. masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// Each record's data is one `Event` protocol buffer (tensorflow/core/util/event.proto):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record of a file holds file_version "brain.Event:2"; each later one a Summary
// with one scalar, as SummaryWriter.add_scalar writes it. Protocol buffers encode a field
// as a key, varint(field << 3 | wire type), then its value: wire type 0 a varint, 1 eight
// bytes, 2 a varint length and that many bytes (strings, nested messages), 5 four bytes.
// TensorBoard reads every file whose name contains "tfevents" in a run's directory, in
// name order; the name it writes is events.out.tfevents.<seconds>.<host>.<pid>.<n>.
#pragma once
#include "util/common.h"

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord uses
static uint32_t crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    return crc32_reflected(table, &ready, 0x82F63B78u, 0, data, n);
}
static uint32_t tfrecord_masked_crc(const void *data, size_t n) {
    uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// ----------------------------------------------------------------------------
// protocol-buffer encoding, into a fixed buffer (an event is a few dozen bytes)

typedef struct { uint8_t b[600]; size_t n; } PbBuf;

static void pb_byte(PbBuf *p, uint8_t v) { if (p->n < sizeof(p->b)) p->b[p->n++] = v; }
static void pb_varint(PbBuf *p, uint64_t v) {
    for (; v >= 0x80; v >>= 7) pb_byte(p, (uint8_t)(v | 0x80));   // 7 bits at a time, low first, high bit: more follow
    pb_byte(p, (uint8_t)v);
}
static void pb_key(PbBuf *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire); }
static void pb_fixed(PbBuf *p, uint64_t bits, int bytes) { for (int i = 0; i < bytes; i++) pb_byte(p, (uint8_t)(bits >> 8 * i)); }
static void pb_double(PbBuf *p, int field, double v) { uint64_t b; memcpy(&b, &v, 8); pb_key(p, field, 1); pb_fixed(p, b, 8); }
static void pb_float(PbBuf *p, int field, float v) { uint32_t b; memcpy(&b, &v, 4); pb_key(p, field, 5); pb_fixed(p, b, 4); }
static void pb_bytes(PbBuf *p, int field, const void *data, size_t n) {
    pb_key(p, field, 2);
    pb_varint(p, n);
    for (size_t i = 0; i < n; i++) pb_byte(p, ((const uint8_t *)data)[i]);
}
static int pb_full(const PbBuf *p) { return p->n >= sizeof(p->b); }   // then the message was cut: not written

// ----------------------------------------------------------------------------
// writing

typedef struct {
    FILE *f;
    char path[1200];
} TfEvents;

// One TFRecord, flushed: a crash loses at most the record being written.
static int tfevents_record(TfEvents *t, const PbBuf *data) {
    uint8_t head[12];
    uint64_t len = data->n;
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)(len >> 8 * i);
    uint32_t hc = tfrecord_masked_crc(head, 8), dc = tfrecord_masked_crc(data->b, data->n);
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(hc >> 8 * i);
    uint8_t foot[4] = {(uint8_t)dc, (uint8_t)(dc >> 8), (uint8_t)(dc >> 16), (uint8_t)(dc >> 24)};
    return fwrite(head, 1, 12, t->f) == 12 && fwrite(data->b, 1, data->n, t->f) == data->n && fwrite(foot, 1, 4, t->f) == 4 &&
           fflush(t->f) == 0;
}

// A new event file in dir (which exists), named as TensorBoard names them, holding its
// file_version record. `wall` is the Unix time. Returns 1, or 0 with a one-line err.
static int tfevents_open(TfEvents *t, const char *dir, double wall, char *err, size_t errn) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    for (char *h = host; *h; h++) if (*h == '/') *h = '_';
    int len = snprintf(t->path, sizeof(t->path), "%s/events.out.tfevents.%010lld.%s.%d.0", dir, (long long)wall, host, (int)getpid());
    if (len < 0 || (size_t)len >= sizeof(t->path)) { snprintf(err, errn, "%s: the directory's path is too long for an event file's name", dir); return 0; }
    t->f = fopen_regular(t->path, "ab", "an event file", err, errn);
    if (!t->f) return 0;
    PbBuf e = {{0}, 0};
    pb_double(&e, 1, wall);
    pb_key(&e, 2, 0);
    pb_varint(&e, 0);
    pb_bytes(&e, 3, "brain.Event:2", 13);
    if (!tfevents_record(t, &e)) { snprintf(err, errn, "%s: write failed (%s)", t->path, strerror(errno)); return 0; }
    return 1;
}

// One scalar event: Event{wall_time, step, summary{value{tag, simple_value}}}. Returns 1, or 0 when
// the write failed (errno says why).
static int tfevents_scalar(TfEvents *t, const char *tag, float value, int64_t step, double wall) {
    PbBuf v = {{0}, 0}, s = {{0}, 0}, e = {{0}, 0};
    pb_bytes(&v, 1, tag, strlen(tag));
    pb_float(&v, 2, value);
    pb_bytes(&s, 1, v.b, v.n);   // Summary.value
    pb_double(&e, 1, wall);
    pb_key(&e, 2, 0);
    pb_varint(&e, (uint64_t)step);
    pb_bytes(&e, 5, s.b, s.n);   // Event.summary
    if (pb_full(&v) || pb_full(&s) || pb_full(&e)) { errno = ENAMETOOLONG; return 0; }
    return tfevents_record(t, &e);
}

static void tfevents_close(TfEvents *t) { if (t->f) fclose(t->f); t->f = NULL; }

// ----------------------------------------------------------------------------
// reading back what tfevents_scalar wrote (a resumed run cuts an earlier run's
// records after the checkpoint: train/monitor.h)

// a varint at *p (below end); 0 if it runs past end
static int pb_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return 1;
    }
    return 0;
}

// The next field of the message [*p, end): its number and wire type, for wire type 0
// its value, for 2 its bytes [*data, *data + *len). Returns 0 at the end or on bad input.
static int pb_next_field(const uint8_t **p, const uint8_t *end, int *field, int *wire, uint64_t *value, const uint8_t **data,
                         uint64_t *len) {
    uint64_t key;
    *value = *len = 0;
    *data = NULL;
    if (*p >= end || !pb_read_varint(p, end, &key)) return 0;
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: return pb_read_varint(p, end, value);
    case 1: if (end - *p < 8) return 0; *p += 8; return 1;
    case 5: if (end - *p < 4) return 0; *p += 4; return 1;
    case 2:
        if (!pb_read_varint(p, end, len) || *len > (uint64_t)(end - *p)) return 0;
        *data = *p;
        *p += *len;
        return 1;
    default: return 0;
    }
}

// An event's step and, for a scalar, its tag (NUL-terminated into tag; "" for the
// file_version record). Returns 0 when the data is not an event.
static int tfevents_parse(const uint8_t *b, size_t n, int64_t *step, char *tag, size_t tagn) {
    const uint8_t *p = b, *end = b + n, *data;
    uint64_t value, len;
    int field, wire;
    *step = 0;
    tag[0] = 0;
    while (pb_next_field(&p, end, &field, &wire, &value, &data, &len)) {
        if (field == 2 && wire == 0) *step = (int64_t)value;
        if (field != 5 || wire != 2) continue;
        const uint8_t *sp = data, *send = data + len, *vp;   // Summary: its first Value's tag
        uint64_t vlen;
        if (!pb_next_field(&sp, send, &field, &wire, &value, &vp, &vlen) || field != 1 || wire != 2) return 0;
        const uint8_t *vend = vp + vlen;
        while (pb_next_field(&vp, vend, &field, &wire, &value, &data, &len))
            if (field == 1 && wire == 2) snprintf(tag, tagn, "%.*s", (int)len, (const char *)data);
    }
    return p == end;
}

// What tfevents_cut found in an event file.
typedef struct {
    long kept, cut;            // scalar records kept, and cut
    long long damaged;         // bytes that do not read as records: kept where they are
    long long first_damage;    // the offset of the first of them
    int removed;               // the file held nothing else, and went
} TfCut;

static uint32_t le32_at(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }

// The record at offset `at` of m[0, size): 1 intact (*len: its data's length), 2 its header
// intact and its data not (*len known), 0 its header damaged, -1 running past the end (torn).
static int tfrecord_at(const uint8_t *m, off_t size, off_t at, uint64_t *len) {
    if (size - at < 12) return -1;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)m[at + i] << 8 * i;
    if (le32_at(m + at + 8) != tfrecord_masked_crc(m + at, 8) || n > (1u << 20)) return 0;
    *len = n;
    if ((uint64_t)(size - at - 12) < n + 4) return -1;
    return le32_at(m + at + 12 + n) == tfrecord_masked_crc(m + at + 12, n) ? 1 : 2;
}

// The scan behind tfevents_cut, on the file's bytes m[0, size): the ranges to cut into
// *drop (the caller frees drop->r), the counts into *c, and into *plain the records that
// hold no scalar (the file_version, or another writer's). Reads nothing past size.
static void tfevents_scan(const uint8_t *m, off_t size, int (*keep)(int64_t step, const char *tag, void *ctx), void *ctx, TfCut *c,
                          ByteRanges *drop, long *plain) {
    memset(c, 0, sizeof(*c));
    *plain = 0;
    for (off_t at = 0; at < size;) {
        uint64_t len = 0;
        int r = tfrecord_at(m, size, at, &len);
        if (r == -1) { ranges_add(drop, at, size); break; }
        if (r == 1) {
            int64_t step;
            char tag[256];
            off_t next = at + 16 + (off_t)len;
            if (!tfevents_parse(m + at + 12, len, &step, tag, sizeof(tag)) || !tag[0]) (*plain)++;
            else if (keep(step, tag, ctx)) c->kept++;
            else c->cut++, ranges_add(drop, at, next);
            at = next;
            continue;
        }
        off_t next = r == 2 ? at + 16 + (off_t)len : at + 1;   // damaged: on to the next intact record
        while (next < size && tfrecord_at(m, size, next, &len) != 1) next++;
        if (!c->damaged) c->first_damage = at;
        c->damaged += next - at;
        at = next;
    }
}

// Cuts from event file `path` the scalar records for which keep(step, tag, ctx) fails,
// and a torn last record (a crash while writing it); nothing else. Records that do not
// read (a damaged byte) stay where they are, with every record after them, which are
// found again by their CRCs; records of other tags or kinds (another writer's) stay
// too. A file left with nothing but its file_version record goes. The file is opened
// with open_regular: what is not a regular file is refused in err. Returns 1, or 0 with err.
static int tfevents_cut(const char *path, int (*keep)(int64_t step, const char *tag, void *ctx), void *ctx, TfCut *c, char *err,
                        size_t errn) {
    memset(c, 0, sizeof(*c));
    CutFile f;
    if (!cut_open(&f, path, "an event file", err, errn)) return 0;
    ByteRanges drop = {0};
    long plain;
    tfevents_scan(f.map, f.size, keep, ctx, c, &drop, &plain);
    c->removed = c->kept == 0 && plain <= 1 && c->damaged == 0;
    return cut_finish(&f, path, c->removed, &drop, err, errn);
}
