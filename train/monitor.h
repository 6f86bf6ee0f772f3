// train/monitor.h: DeepSpeed's monitors (deepspeed/monitor/): the training's scalars
// as TensorBoard event files (formats/tfevents.h) and as csvMonitor's CSV files,
// written by rank 0 after every step, each record flushed as it is written.
// docs/monitoring.md lists the metrics and how a resumed run continues the files.
//
// Names and axis are DeepSpeed's: the tags are engine.py's "Train/Samples/..." (and
// pipe/engine.py's eval_loss), and a value's step is the number of samples (sequences)
// the model had seen when the value was measured, as DeepSpeed's global_samples:
//   - a step's train_loss, lr, loss_scale and grad_norm at the samples seen before the
//     step (DeepSpeed writes the loss in backward(), before its counter advances; its
//     lr and loss scale after the step are the next step's, at the same count);
//   - the step's timings, throughput and memory at the samples seen after it (DeepSpeed's
//     elapsed_time_ms_* with wall_clock_breakdown), and the validation loss after step k
//     at k global batches.
// The files go in output_path/job_name, the tensorboard and csv_monitor blocks' (or
// --tensorboard DIR, --csv-monitor DIR, --job-name JOB).
#pragma once
#include "formats/tfevents.h"
#include "train/jsonl.h"
#include "config/train_config.h"
#include "comm/comm.h"
#include "train/savedir.h"
#include <dirent.h>

// What the monitors write. at_start: the metric belongs to the model before the step
// (its loss, the lr and loss scale it trains with), so it goes at the samples seen then.
typedef struct { const char *tag; int at_start; } MonitorMetric;
enum { MON_TRAIN_LOSS, MON_LR, MON_LOSS_SCALE, MON_GRAD_NORM, MON_EVAL_LOSS, MON_TOKENS_PER_SEC, MON_GFLOPS, MON_MFU,
       MON_MEMORY, MON_FORWARD, MON_BACKWARD, MON_COMM_WAIT, MON_STEP_TIME, N_MON };
static const MonitorMetric MONITOR_METRICS[N_MON] = {
    {"Train/Samples/train_loss", 1},              // DeepSpeed's
    {"Train/Samples/lr", 1},                      // DeepSpeed's
    {"Train/Samples/loss_scale", 1},              // DeepSpeed's, with fp16
    {"Train/Samples/grad_norm", 1},               // the global norm before clipping
    {"Train/Samples/eval_loss", 0},               // DeepSpeed's pipeline engine's name for the validation loss
    {"Train/Samples/tokens_per_sec", 0},
    {"Train/Samples/gflops", 0},                  // achieved model GFLOP/s, all ranks
    {"Train/Samples/mfu", 0},                     // of the peak (a fraction), where the peak is known
    {"Train/Samples/memory_GiB", 0},              // in use: the GPU's, or the process's resident memory
    {"Train/Samples/elapsed_time_ms_forward", 0}, // DeepSpeed's, with wall_clock_breakdown (--breakdown 1)
    {"Train/Samples/elapsed_time_ms_backward", 0},
    {"Train/Samples/elapsed_time_ms_comm_wait", 0},
    {"Train/Samples/elapsed_time_ms_step", 0},    // the optimizer step (DeepSpeed's STEP timer)
};

typedef struct {
    int on;                       // this rank writes (rank 0, a monitor enabled)
    long long samples_per_step;   // the global batch
    TfEvents tb;                  // tb.f NULL: no TensorBoard files
    char csv_dir[1100];           // "": no CSV files
    FILE *csv[N_MON];             // opened at a metric's first value
} Monitor;

// ----------------------------------------------------------------------------
// what a resumed run keeps of the files

// A record an earlier run wrote is kept when it is about a step at or before `start`,
// the step this run continues from: the rest, this run writes again. A tag zeroc does
// not write is another writer's: kept.
typedef struct { long long start_samples; } MonitorCut;
static int monitor_keeps(int64_t step, const char *tag, void *ctx) {
    long long s = ((MonitorCut *)ctx)->start_samples;
    for (int i = 0; i < N_MON; i++)
        if (strcmp(tag, MONITOR_METRICS[i].tag) == 0) return MONITOR_METRICS[i].at_start ? step < s : step <= s;
    return 1;
}

// the CSV file name DeepSpeed's csvMonitor gives a tag: '/' and ' ' become '_'
static void csv_file_name(char *out, size_t n, const char *dir, const char *tag) {
    int k = snprintf(out, n, "%s/", dir);
    for (const char *p = tag; *p && k + 6 < (int)n; p++) out[k++] = *p == '/' || *p == ' ' ? '_' : *p;
    snprintf(out + k, n - k, ".csv");
}

// Cuts from a metric's CSV file the rows after `cut` and a torn last row (a crash while
// writing it), whatever their length or order; a row that does not read as "step,value"
// stays, counted in *unread. A file left without rows goes, so that the next value starts
// it with its header again. Returns 1, or 0 with err (a path that is not a regular file).
static int csv_cut(const char *path, int metric, MonitorCut *cut, long *removed, long *unread, char *err, size_t errn) {
    *removed = *unread = 0;
    CutFile f;
    if (!cut_open(&f, path, "a CSV file", err, errn)) return errno == ENOENT;
    const char *m = (const char *)f.map;
    off_t size = f.size;
    ByteRanges drop = {0};
    long kept = 0;
    for (off_t at = 0; at < size;) {
        const char *nl = (const char *)memchr(m + at, '\n', (size_t)(size - at));
        if (!nl) { ranges_add(&drop, at, size); break; }   // torn
        off_t next = nl - m + 1;
        if (at > 0) {   // the header is kept
            char num[24];
            size_t n = (size_t)(next - at) < sizeof(num) ? (size_t)(next - at) : sizeof(num) - 1;
            memcpy(num, m + at, n);
            num[n] = 0;
            char *end;
            long long samples = strtoll(num, &end, 10);
            if (end == num || *end != ',') (*unread)++;
            else if (monitor_keeps(samples, MONITOR_METRICS[metric].tag, cut)) kept++;
            else (*removed)++, ranges_add(&drop, at, next);
        }
        at = next;
    }
    return cut_finish(&f, path, kept == 0 && *unread == 0, &drop, err, errn);
}

// Every event file in dir cut after `cut`'s step (tfevents_cut), each damaged one named
// in a warning. An entry named like an event file that is not a regular file (a FIFO) is
// left alone with a warning: TensorBoard's test for an event file is the name alone.
static int tb_cut_dir(const char *dir, MonitorCut *cut, long *removed, char *err, size_t errn) {
    DIR *d = opendir(dir);
    *removed = 0;
    if (!d) { snprintf(err, errn, "%s: cannot read (%s)", dir, strerror(errno)); return 0; }
    int ok = 1;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (!strstr(e->d_name, "tfevents")) continue;   // TensorBoard's own test for an event file
        char path[1400];
        struct stat sb;
        TfCut c;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            diag("warning", "tensorboard: %s: %s, not an event file: left alone", path, file_kind(sb.st_mode));
            continue;
        }
        ok = tfevents_cut(path, monitor_keeps, cut, &c, err, errn);
        if (ok && c.damaged)
            diag("warning", "tensorboard: %s: %lld bytes from offset %lld do not read as records (damaged): kept as they are, "
                 "with the %ld records around them (TensorBoard stops reading the file there)", path, c.damaged, c.first_damage, c.kept);
        *removed += c.cut;
    }
    closedir(d);
    return ok;
}

// ----------------------------------------------------------------------------
// opening

// Python's repr() of a float, as csvMonitor's csv.writer writes it: the shortest
// digits that read back as the same double, positional from 1e-4 up to 1e16
// (with ".0" when they end without a point), scientific outside.
static void python_float_text(double v, char *out, size_t n) {
    if (isnan(v)) { snprintf(out, n, "nan"); return; }
    if (isinf(v)) { snprintf(out, n, v > 0 ? "inf" : "-inf"); return; }
    int digits = 1;
    for (; digits < 17; digits++) {
        snprintf(out, n, "%.*e", digits - 1, v);
        if (strtod(out, NULL) == v) break;
    }
    snprintf(out, n, "%.*e", digits - 1, v);
    int exp10 = atoi(strchr(out, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) return;
    snprintf(out, n, "%.*f", digits - 1 - exp10 > 0 ? digits - 1 - exp10 : 0, v);
    if (!strchr(out, '.')) snprintf(out + strlen(out), n - strlen(out), ".0");
}

// the note that what an earlier run wrote after `start` is gone
static void monitor_say_cut(const char *block, const char *dir, long n, const char *what, int start, long long samples) {
    if (start == 0)
        diag("note", "%s: %s: %ld %s of an earlier run removed: a new run (no --resume) starts the job's files over", block, dir, n, what);
    else
        diag("note", "%s: %s: %ld %s of an earlier run after step %d (%lld samples) removed: this run continues from there",
             block, dir, n, what, start, samples);
}

// Unix time: the events' wall_time, and the event file's name
static double unix_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// a monitor's job directory made and locked; a failure names the monitor's flag
static int monitor_dir_open(const char *what, const char *dir, char *err, size_t n, char *note, size_t nn) {
    char e[1300] = "";
    if (!mkdir_p(dir, e, sizeof(e))) { snprintf(err, n, "%s: %s", what, e); return 0; }
    return dir_lock(dir, "choose another --job-name", err, n, note, nn);
}

// Collective: the monitors tc asks for, continuing from step `start` (0 for a new run;
// the checkpoint's step for --resume). Rank 0 makes each job's directory and locks it
// as --save's (train/savedir.h: a second live run in the job is refused before it
// touches anything), cuts what an earlier run wrote there after `start` (with a note),
// and opens a new event file.
// A directory that cannot be made or a file that cannot be written stops every rank.
static void monitor_open(Monitor *mon, const TrainConfig *tc, Comm *comm, int start, int say) {
    memset(mon, 0, sizeof(*mon));
    mon->samples_per_step = tc->total_batch;
    if (!tc->tensorboard && !tc->csv_monitor) return;
    char err[1600] = "", tb_dir[1100] = "";
    int ok = 1;
    MonitorCut cut = {(long long)start * tc->total_batch};
    if (comm->rank == 0) {
        if (tc->tensorboard) monitor_job_dir(tb_dir, sizeof(tb_dir), tc->tb_path, tc->tb_job);
        if (tc->csv_monitor) monitor_job_dir(mon->csv_dir, sizeof(mon->csv_dir), tc->csv_path, tc->csv_job);
        long removed = 0;
        char note[2400] = "";
        // each job directory locked before anything in it is cut: another live run's files are never touched
        if (tb_dir[0]) ok = monitor_dir_open("tensorboard (--tensorboard)", tb_dir, err, sizeof(err), note, sizeof(note));
        if (note[0]) diag("note", "tensorboard: %s", note), note[0] = 0;
        if (ok && mon->csv_dir[0]) ok = monitor_dir_open("csv_monitor (--csv-monitor)", mon->csv_dir, err, sizeof(err), note, sizeof(note));
        if (note[0]) diag("note", "csv_monitor: %s", note);
        if (ok && tb_dir[0]) {
            ok = tb_cut_dir(tb_dir, &cut, &removed, err, sizeof(err)) && tfevents_open(&mon->tb, tb_dir, unix_time(), err, sizeof(err));
            if (ok && removed) monitor_say_cut("tensorboard", tb_dir, removed, "records", start, cut.start_samples);
        }
        if (ok && mon->csv_dir[0]) {
            long csv_removed = 0, unread = 0;
            for (int i = 0; ok && i < N_MON; i++) {
                char path[1400];
                csv_file_name(path, sizeof(path), mon->csv_dir, MONITOR_METRICS[i].tag);
                ok = csv_cut(path, i, &cut, &removed, &unread, err, sizeof(err));
                csv_removed += removed;
                if (ok && unread)
                    diag("warning", "csv_monitor: %s: %ld row%s not of the form step,value, kept as found", path, unread, unread == 1 ? "" : "s");
            }
            if (ok && csv_removed) monitor_say_cut("csv_monitor", mon->csv_dir, csv_removed, "rows", start, cut.start_samples);
        }
        if (ok && say) {
            if (tb_dir[0]) printf("tensorboard: %s (tensorboard --logdir %s)\n", mon->tb.path, tc->tb_path[0] ? tc->tb_path : ".");
            if (mon->csv_dir[0]) printf("csv_monitor: %s/Train_Samples_*.csv\n", mon->csv_dir);
        }
        mon->on = ok;
    }
    if (!comm_agree(comm, ok, err, sizeof(err))) fatal("%s", err);
}

// ----------------------------------------------------------------------------
// writing

// a write failed: say so once, and that monitor stops; training goes on (as the --log file does)
static void monitor_failed(const char *path) {
    diag("warning", "%s: write failed (%s): this monitor stops here, training goes on", path, strerror(errno));
}
static void monitor_csv_stop(Monitor *mon) {
    for (int i = 0; i < N_MON; i++) if (mon->csv[i]) fclose(mon->csv[i]), mon->csv[i] = NULL;
    mon->csv_dir[0] = 0;   // every metric's file: one warning, not one per metric and step
}

// One value of a metric at `samples`, to each monitor that is on.
static void monitor_write(Monitor *mon, int metric, double value, long long samples) {
    const char *tag = MONITOR_METRICS[metric].tag;
    if (mon->tb.f && !tfevents_scalar(&mon->tb, tag, (float)value, samples, unix_time())) monitor_failed(mon->tb.path), tfevents_close(&mon->tb);
    if (!mon->csv_dir[0]) return;
    char path[1400], num[64];
    csv_file_name(path, sizeof(path), mon->csv_dir, tag);
    FILE **f = &mon->csv[metric];
    if (!*f) {   // the header, "step,<the tag's last part>", where the file starts
        char err[1500];
        *f = fopen_regular(path, "ab", "a CSV file", err, sizeof(err));
        if (!*f) { diag("warning", "%s: this monitor stops here, training goes on", err); monitor_csv_stop(mon); return; }
        if (fseeko(*f, 0, SEEK_END) == 0 && ftello(*f) == 0 && fprintf(*f, "step,%s\r\n", strrchr(tag, '/') + 1) < 0) {
            monitor_failed(path);
            monitor_csv_stop(mon);
            return;
        }
    }
    python_float_text(value, num, sizeof(num));
    if (fprintf(*f, "%lld,%s\r\n", samples, num) < 0 || fflush(*f) != 0) monitor_failed(path), monitor_csv_stop(mon);
}

// A step's values (s->step: 1-based, done), DeepSpeed's first.
static void monitor_step(Monitor *mon, const StepStats *s) {
    if (!mon->on) return;
    long long before = (long long)(s->step - 1) * mon->samples_per_step, after = before + mon->samples_per_step;
    monitor_write(mon, MON_TRAIN_LOSS, s->loss, before);
    monitor_write(mon, MON_LR, s->lr, before);
    if (s->loss_scale > 0) monitor_write(mon, MON_LOSS_SCALE, s->loss_scale, before);
    monitor_write(mon, MON_GRAD_NORM, s->grad_norm, before);
    if (s->phase_ms[0] >= 0)
        for (int i = 0; i < 4; i++) monitor_write(mon, MON_FORWARD + i, s->phase_ms[i], after);
    monitor_write(mon, MON_TOKENS_PER_SEC, s->tokens_per_sec, after);
    monitor_write(mon, MON_GFLOPS, s->gflops, after);
    if (s->mfu >= 0) monitor_write(mon, MON_MFU, s->mfu, after);
    monitor_write(mon, MON_MEMORY, s->mem_bytes / 1073741824.0, after);
}

// the validation loss after step `done`
static void monitor_val(Monitor *mon, int done, float val_loss) {
    if (mon->on) monitor_write(mon, MON_EVAL_LOSS, val_loss, (long long)done * mon->samples_per_step);
}

static void monitor_close(Monitor *mon) {
    tfevents_close(&mon->tb);
    for (int i = 0; i < N_MON; i++) if (mon->csv[i]) fclose(mon->csv[i]);
    memset(mon, 0, sizeof(*mon));
}
