// train/savedir.h: the --save directory, made ready before anything is trained. It is
// created with its parents and test-written, so a run that cannot save fails at
// start-up rather than after hours of training. It is locked, so a second run saving
// into the same directory refuses to start instead of overwriting the first one's
// checkpoints. The monitors' job directories are locked the same way (train/monitor.h).
//
// The lock is DIR/.lock. Rank 0 holds a kernel lock on it (flock) for as long as it
// runs, and its text says "PID HOST". The kernel lock makes taking it atomic: of two
// runs that start at once, or that both find a lock left behind, exactly one gets it,
// and the other refuses to start, naming the holder. The kernel drops the lock when
// its process ends, however it ends: a kill -9, a watchdog abort. So the kernel lock
// is the truth: a lock file whose kernel lock is free is taken over with a note, even
// when its pid runs, since a restarted container reuses pids (pid 1 for a trainer
// that is the entrypoint). The pid is information for the message. A lock from another
// host is refused, with advice to remove it once that run is gone: some shared
// filesystems keep flock local to each host. Rank 0 removes its lock files when it
// exits, normally or through fatal(), with an atexit handler.
#pragma once
#include "comm/comm.h"
#include <sys/stat.h>
#include <sys/file.h>
#include <signal.h>

// the lock files this process holds: open for its lifetime, the descriptors carry the kernel locks
#define DIR_LOCKS_MAX 4
static struct { char path[1100]; int fd; dev_t dev; ino_t ino; } g_locks[DIR_LOCKS_MAX];
static int g_n_locks;

static void dir_unlock_all(void) {
    for (int i = 0; i < g_n_locks; i++) {
        unlink(g_locks[i].path);   // before the kernel lock goes with the descriptor
        close(g_locks[i].fd);
    }
    g_n_locks = 0;
}

// Whether process pid runs on this host: it exists and is not a zombie, a process that
// exited and whose status its parent has not collected yet (/proc/PID/stat's state Z,
// or X while it goes).
static int pid_running(int pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    char path[64], stat_text[512] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;   // no /proc: trust kill()
    size_t n = fread(stat_text, 1, sizeof(stat_text) - 1, f);
    fclose(f);
    stat_text[n] = 0;
    const char *paren = strrchr(stat_text, ')');   // "PID (COMM) STATE ...", and COMM may hold anything
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

// Takes DIR/.lock for this process; `instead` is the advice for a refusal ("choose another
// --save directory"). A directory this process has locked already is locked once. Returns
// 1, with a note when a lock left behind was taken over, or 0 with err.
static int dir_lock(const char *dir, const char *instead, char *err, size_t errn, char *note, size_t noten) {
    char path[1100], host[256] = "?", text[512];
    struct stat ds;
    if (stat(dir, &ds) != 0) { snprintf(err, errn, "%s: cannot read (%s)", dir, strerror(errno)); return 0; }
    for (int i = 0; i < g_n_locks; i++) if (g_locks[i].dev == ds.st_dev && g_locks[i].ino == ds.st_ino) return 1;
    if (g_n_locks == DIR_LOCKS_MAX) { snprintf(err, errn, "%s: more than %d directories to lock", dir, DIR_LOCKS_MAX); return 0; }
    snprintf(path, sizeof(path), "%s/.lock", dir);
    gethostname(host, sizeof(host) - 1);
    snprintf(text, sizeof(text), "%d %s\n", (int)getpid(), host);
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open_regular(path, O_RDWR | O_CREAT, "a lock file", err, errn);
        if (fd < 0) return 0;
        int held = flock(fd, LOCK_EX | LOCK_NB) != 0;
        if (held && errno != EWOULDBLOCK) {
            snprintf(err, errn, "%s: cannot lock the lock file (%s)", path, strerror(errno));
            close(fd);
            return 0;
        }
        // the lock of the file we opened: is it still the one at `path`? (a run that exits removes
        // its lock file; a third run may have created a new one since)
        struct stat a, b;
        if (!held && (fstat(fd, &a) != 0 || stat(path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
            close(fd);
            continue;
        }
        char other[512] = "", other_host[256] = "";
        int other_pid = 0;
        ssize_t got = pread(fd, other, sizeof(other) - 1, 0);
        other[got > 0 ? got : 0] = 0;
        int parsed = sscanf(other, "%d %255s", &other_pid, other_host) == 2 && other_pid > 0;
        int here = parsed && strcmp(other_host, host) == 0;
        if (held || (parsed && !here) || (!parsed && other[0])) {
            if (held && !(parsed && here && pid_running(other_pid)))   // the text may be a dead owner's, not yet rewritten
                snprintf(err, errn, "%s is in use by another run (it holds the lock file %s): %s or stop that run", dir, path, instead);
            else if (parsed)
                snprintf(err, errn, "%s is in use by another run (pid %d on host %s, lock file %s): %s%s", dir, other_pid, other_host,
                         path, instead, here ? " or stop that run" : "; if that run is gone, remove the lock file");
            else
                snprintf(err, errn, "%s is locked by another run (lock file %s, unreadable: remove it if no run is using the directory)",
                         dir, path);
            close(fd);
            return 0;
        }
        if (parsed) {   // left behind by a process of this host: its kernel lock is gone with it
            snprintf(note, noten, "%s: took over the lock of pid %d on %s, %s (a run that did not exit cleanly)", dir, other_pid,
                     other_host, pid_running(other_pid) ? "whose kernel lock is free: that pid is another process now" : "which no longer runs");
            test_stop_point("lock-takeover");
        }
        int ok = ftruncate(fd, 0) == 0 && pwrite(fd, text, strlen(text), 0) == (ssize_t)strlen(text) && fsync(fd) == 0;
        if (!ok) {
            snprintf(err, errn, "%s: cannot write the lock file (%s)", path, strerror(errno));
            unlink(path);
            close(fd);
            return 0;
        }
        snprintf(g_locks[g_n_locks].path, sizeof(g_locks[g_n_locks].path), "%s", path);
        g_locks[g_n_locks].fd = fd;
        g_locks[g_n_locks].dev = ds.st_dev;
        g_locks[g_n_locks].ino = ds.st_ino;
        if (g_n_locks++ == 0) atexit(dir_unlock_all);
        return 1;
    }
    snprintf(err, errn, "%s: the lock file %s keeps changing (other runs starting there?)", dir, path);
    return 0;
}

// a small file written, synced and removed: the directory takes writes
static int savedir_test_write(const char *dir, char *err, size_t errn) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/.write_test", dir);
    OutFile f;
    if (out_open(&f, path, 0)) out_write(&f, "zeroc\n", 6);
    int ok = out_finish(&f);
    if (!ok) snprintf(err, errn, "cannot write there: %s", f.err);
    unlink(path);
    return ok;
}

// Collective, at start-up: rank 0 creates, locks and test-writes DIR; on failure every
// rank stops with the one line.
static void savedir_open(Comm *c, const char *dir) {
    char err[4096] = "", note[4096] = "";
    int ok = 1;
    if (c->rank == 0) {
        ok = mkdir_p(dir, err, sizeof(err)) && dir_lock(dir, "choose another --save directory", err, sizeof(err), note, sizeof(note)) &&
             savedir_test_write(dir, err, sizeof(err));
        if (note[0]) diag("note", "%s", note);
    }
    if (!comm_agree(c, ok, err, sizeof(err))) fatal("--save: %s", err);
}
