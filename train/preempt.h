// train/preempt.h: a scheduler's preemption (SIGTERM), Ctrl-C (SIGINT) and a request
// for a checkpoint (SIGUSR1), acted on between two optimizer steps, by every rank
// after the same step:
//   SIGTERM, SIGINT  finish the current step, save a checkpoint with --save, and exit
//                    with status 75, EX_TEMPFAIL in sysexits.h: stopped on request,
//                    resume with --resume. A second one ends the process at once.
//   SIGUSR1          save a checkpoint after the current step and go on
// The handler only sets a flag. A signal may reach only some ranks: a kill to one
// process, or a scheduler or mpirun signalling them one by one. So once per step
// every rank ORs its flags with the others' (one int, comm_control_or), and all act
// alike.
#pragma once
#include "comm/comm.h"
#include <signal.h>

#define EXIT_PREEMPTED 75
// PREEMPT_SIGINT and PREEMPT_SIGTERM say which stop signal arrived. preempt_poll ORs them across the
// ranks with the rest, so rank 0 can name the signal whichever rank received it.
enum { PREEMPT_STOP = 1, PREEMPT_SAVE = 2, PREEMPT_SIGINT = 4, PREEMPT_SIGTERM = 8 };

static volatile sig_atomic_t g_preempt_flags = 0;

static void preempt_handler(int sig) {
    if (sig == SIGUSR1) { __atomic_fetch_or(&g_preempt_flags, PREEMPT_SAVE, __ATOMIC_SEQ_CST); return; }
    if (g_preempt_flags & PREEMPT_STOP) {   // the second stop request: now
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    __atomic_fetch_or(&g_preempt_flags, PREEMPT_STOP | (sig == SIGINT ? PREEMPT_SIGINT : PREEMPT_SIGTERM), __ATOMIC_SEQ_CST);
}

static void preempt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = preempt_handler;
    sa.sa_flags = SA_RESTART;   // system calls (MPI's included) go on undisturbed
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

// Collective, once per step: the requests of every rank (PREEMPT_* bits); the save
// request is consumed, the stop request stays.
static int preempt_poll(Comm *c) {
    int mine = __atomic_fetch_and(&g_preempt_flags, ~PREEMPT_SAVE, __ATOMIC_SEQ_CST);
    return comm_control_or(c, mine);
}

// req: preempt_poll's answer, the same on every rank
static const char *preempt_signal_name(int req) {
    int i = req & PREEMPT_SIGINT, t = req & PREEMPT_SIGTERM;
    return i && t ? "SIGINT and SIGTERM" : i ? "SIGINT" : "SIGTERM";
}
