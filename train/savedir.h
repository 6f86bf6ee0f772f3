// train/savedir.h: the --save directory, made ready before anything is trained. It is
// created with its parents and test-written, so a run that cannot save fails at
// start-up rather than after hours of training. It is locked, so a second run saving
// into the same directory refuses to start instead of overwriting the first one's
// checkpoints.
//
// The lock is DIR/.lock, created with O_EXCL and holding "PID HOST" of rank 0. A run
// that finds it refuses to start, naming that pid and host. A lock left by a process
// that no longer exists on this host is taken over with a note: after a kill -9, a
// watchdog abort, or a machine that went down. A lock from another host cannot be
// checked from here, so the message says to remove it once that run is gone. Rank 0
// removes its lock when the process exits, normally or through fatal(), with an
// atexit handler.
#pragma once
#include "comm/comm.h"
#include <sys/stat.h>
#include <signal.h>

static char g_lock_path[1100];   // the lock this process holds ("" if none)

static void savedir_unlock(void) {
    if (g_lock_path[0]) unlink(g_lock_path);
    g_lock_path[0] = 0;
}

// Takes DIR/.lock. Returns 1, with a note when a stale lock was taken over, or 0 with err.
static int savedir_lock(const char *dir, char *err, size_t errn, char *note, size_t noten) {
    char path[1100], host[256] = "?", text[512];
    snprintf(path, sizeof(path), "%s/.lock", dir);
    gethostname(host, sizeof(host) - 1);
    snprintf(text, sizeof(text), "%d %s\n", (int)getpid(), host);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            int ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text) && fsync(fd) == 0;
            close(fd);
            if (!ok) { unlink(path); snprintf(err, errn, "%s: cannot write the lock file (%s)", path, strerror(errno)); return 0; }
            snprintf(g_lock_path, sizeof(g_lock_path), "%s", path);
            atexit(savedir_unlock);
            return 1;
        }
        if (errno != EEXIST) { snprintf(err, errn, "%s: cannot create the lock file (%s)", path, strerror(errno)); return 0; }
        // held: by a live run, or left behind by a dead one
        char other[512] = "", other_host[256] = "";
        int other_pid = 0;
        FILE *f = fopen(path, "rb");
        if (f) { if (!fgets(other, sizeof(other), f)) other[0] = 0; fclose(f); }
        if (sscanf(other, "%d %255s", &other_pid, other_host) != 2 || other_pid <= 0) {
            snprintf(err, errn, "%s is locked by another run (lock file %s, unreadable: remove it if no run is using the directory)", dir, path);
            return 0;
        }
        int here = strcmp(other_host, host) == 0;
        if (!here || kill(other_pid, 0) == 0 || errno != ESRCH) {
            snprintf(err, errn, "%s is in use by another run (pid %d on host %s, lock file %s): choose another --save directory%s",
                     dir, other_pid, other_host, path,
                     here ? " or stop that run" : "; if that run is gone, remove the lock file");
            return 0;
        }
        snprintf(note, noten, "%s: took over the lock of pid %d on %s, which no longer exists (a run that did not exit cleanly)",
                 dir, other_pid, other_host);
        unlink(path);   // then try again: if another run takes it first, O_EXCL says so
    }
    snprintf(err, errn, "%s: another run took the lock first", dir);
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
        ok = mkdir_p(dir, err, sizeof(err)) && savedir_lock(dir, err, sizeof(err), note, sizeof(note)) &&
             savedir_test_write(dir, err, sizeof(err));
        if (note[0]) diag("note", "%s", note);
    }
    if (!comm_agree(c, ok, err, sizeof(err))) fatal("--save: %s", err);
}
