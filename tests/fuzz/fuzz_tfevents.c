// Fuzz target: the scan a resumed run makes of an earlier run's event file (formats/tfevents.h):
// damaged records skipped to the next intact one, torn tails, foreign records. The cut keeps
// steps up to the input's first byte. What it cuts must lie in order inside the file.
#include "formats/tfevents.h"

static int keep_up_to(int64_t step, const char *tag, void *ctx) { return step <= *(int64_t *)ctx; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int64_t last = size ? data[0] : 0;
    TfCut c;
    ByteRanges drop = {0};
    long plain;
    tfevents_scan(data, (off_t)size, keep_up_to, &last, &c, &drop, &plain);
    off_t end = 0;
    for (int i = 0; i < drop.n; i++) {
        if (drop.r[i].lo < end || drop.r[i].hi <= drop.r[i].lo || drop.r[i].hi > (off_t)size) abort();
        end = drop.r[i].hi;
    }
    if (c.damaged < 0 || c.damaged > (long long)size) abort();
    free(drop.r);
    return 0;
}
