// dev/cuda/flash_emulate.h: CPU stand-ins for the hardware the kernels of
// cuda/flash_attention.cuh reach, so that those kernels' own code (not a transcription) runs
// on the CPU, one CUDA thread per fiber (dev/cuda/flash_emulate.cpp).
//
// Include this file before cuda/flash_attention.cuh; it defines FLASH_EMULATE, which makes
// the header take these definitions instead of its PTX wrappers and leave out its host
// launchers. What is emulated, from the PTX ISA ("ldmatrix", "mma.m16n8k16" fragment
// layouts, "cp.async", "cp.async.wait_group") and the CUDA programming guide:
//   - bf16 values (round to nearest even), the thread and block indices, dynamic shared memory;
//   - warp-collective instructions (ldmatrix .x4 with and without .trans, mma.sync m16n8k16
//     bf16 -> fp32, shfl.xor): each lane deposits its operands and waits until all 32 lanes of
//     the warp have arrived at the same instruction; the last one computes every lane's result;
//   - __syncthreads: every thread of the block that has not exited;
//   - cp.async: each copy is queued with its commit group and lands when the issuing thread's
//     wait_group lets it (or at once: emu_copies_early), zero-filled when src_bytes is 0.
// Threads are scheduled one at a time; which runs next is chosen by a seeded policy (the
// generator of dev/cuda/host_check.h), so that different interleavings of the warps between
// barriers are tried.
// Checked on every access (each failure is counted in g_emu.errors with its first message):
//   - shared memory: bounds, alignment (16 B for ldmatrix rows and 16-byte copies), and races:
//     per 4-byte word, a read or write by one thread and a write by another with no barrier
//     between them; a read of a word whose cp.async has not been waited for (by any thread);
//   - global memory read by cp.async: inside a buffer registered with emu_register.
// Plain C++ loads and stores of global memory are the kernels' own code on host memory
// (an out-of-bounds access there is for AddressSanitizer: tests build with -fsanitize=address).
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <ucontext.h>
#include <vector>
#include <algorithm>
#include <string>
#include "dev/cuda/host_check.h"

#define FLASH_EMULATE 1
#define __device__
#define __host__
#define __forceinline__ inline
#define FA_KERNEL(threads, min_blocks) void

// ----------------------------------------------------------------------------
// bf16 and the CUDA vector types the kernels name

struct __nv_bfloat16 { uint16_t bits; };
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };  // 4-byte aligned as CUDA's
typedef __nv_bfloat16 floatX;
struct uint4 { uint32_t x, y, z, w; };
struct EmuDim3 { unsigned x, y, z; };

static inline float __bfloat162float(__nv_bfloat16 v) {
    uint32_t u = (uint32_t)v.bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline __nv_bfloat16 emu_bf16(float f) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) r.bits = (uint16_t)((u >> 16) | 0x40u);
    else r.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    __nv_bfloat162 v;
    v.x = emu_bf16(lo);
    v.y = emu_bf16(hi);
    return v;
}
static inline float emu_lo(uint32_t r) { __nv_bfloat16 b; b.bits = (uint16_t)(r & 0xffff); return __bfloat162float(b); }
static inline float emu_hi(uint32_t r) { __nv_bfloat16 b; b.bits = (uint16_t)(r >> 16); return __bfloat162float(b); }
static inline uint32_t emu_pack(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

// ----------------------------------------------------------------------------
// the emulated machine

enum { EMU_RUNNABLE, EMU_AT_WARP_OP, EMU_AT_BARRIER, EMU_DONE };
enum { EMU_OP_LDSM, EMU_OP_LDSM_T, EMU_OP_MMA, EMU_OP_SHFL };

struct EmuCopy { char *dst; const char *src; int bytes, src_bytes, group; };

struct EmuThread {
    int tid, state;
    jmp_buf jb;                          // where the thread continues
    ucontext_t start;                    // its first entry (makecontext)
    std::vector<char> stack;
    std::vector<EmuCopy> copies;         // cp.async issued, not yet landed
    int groups;                          // commit groups closed so far
    // the warp operation it waits in: kind, operands, results
    int op;
    const char *addr;
    uint32_t a[4], b0, b1;
    float c[4], f;
    int lane_mask;
};

// per 4-byte word of shared memory: the last write (barrier epoch, thread), the reads of the
// current epoch (one thread, or EMU_MANY), and the thread whose cp.async to it is in flight
#define EMU_MANY (-2)
struct EmuWord { int w_epoch, w_tid, r_epoch, r_tid, pending_tid; };

struct EmuRange { const char *p; size_t n; };

struct Emu {
    EmuDim3 block_idx, grid_dim;
    int nthreads;
    std::vector<EmuThread> th;
    int cur;                             // the running thread
    jmp_buf sched;
    std::vector<char> smem_raw;
    char *smem;
    size_t smem_bytes;
    std::vector<EmuWord> shadow;
    int epoch;
    void (*body)(void *);                // the kernel call of this launch (a closure)
    void *body_arg;
    // policy (the choices draw on dev/cuda/host_check.h's generator)
    int copies_early;                    // 1: cp.async lands when issued; 0: at the wait that needs it
    int switch_percent;                  // chance to move to another warp at each scheduling point
    // results
    long errors;
    std::string first_error;
    std::vector<EmuRange> global;        // buffers cp.async may read
    long warp_ops, barriers, copies;
};
static Emu g_emu;

static void emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void emu_fail(const char *fmt, ...) {
    if (g_emu.errors++ == 0) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        g_emu.first_error = buf;
    }
}
static void emu_register(const void *p, size_t bytes) { g_emu.global.push_back({(const char *)p, bytes}); }

// the thread indices the kernels read
static inline EmuDim3 emu_thread_idx(void) { EmuDim3 d = {(unsigned)g_emu.th[g_emu.cur].tid, 0, 0}; return d; }
#define threadIdx (emu_thread_idx())
#define blockIdx (g_emu.block_idx)
#define gridDim (g_emu.grid_dim)
#define fa_smem ((void *)g_emu.smem)

// ----------------------------------------------------------------------------
// shared-memory checks

static int emu_smem_word(const void *p, int bytes, int align, const char *what) {
    const char *c = (const char *)p;
    if (c < g_emu.smem || c + bytes > g_emu.smem + g_emu.smem_bytes) {
        emu_fail("%s: shared address %ld (+%d bytes) outside the %zu bytes of the launch (thread %d, block %u,%u)", what,
                 (long)(c - g_emu.smem), bytes, g_emu.smem_bytes, g_emu.th[g_emu.cur].tid, g_emu.block_idx.x, g_emu.block_idx.y);
        return -1;
    }
    if ((c - g_emu.smem) % align) {
        emu_fail("%s: shared address %ld not %d-byte aligned", what, (long)(c - g_emu.smem), align);
        return -1;
    }
    return (int)((c - g_emu.smem) / 4);
}
static void emu_check_read(int tid, int w, int n, const char *what) {
    for (int i = w; i < w + n; i++) {
        EmuWord &s = g_emu.shadow[i];
        if (s.pending_tid >= 0)
            emu_fail("%s: thread %d reads shared word %d while thread %d's cp.async to it is in flight (block %u,%u)", what,
                     tid, i, s.pending_tid, g_emu.block_idx.x, g_emu.block_idx.y);
        else if (s.w_epoch == g_emu.epoch && s.w_tid != tid)
            emu_fail("%s: thread %d reads shared word %d written by thread %d with no barrier between (block %u,%u)", what,
                     tid, i, s.w_tid, g_emu.block_idx.x, g_emu.block_idx.y);
        if (s.r_epoch != g_emu.epoch) { s.r_epoch = g_emu.epoch; s.r_tid = tid; }
        else if (s.r_tid != tid) s.r_tid = EMU_MANY;
    }
}
static void emu_check_write(int tid, int w, int n, const char *what) {
    for (int i = w; i < w + n; i++) {
        EmuWord &s = g_emu.shadow[i];
        if (s.r_epoch == g_emu.epoch && s.r_tid != tid)
            emu_fail("%s: thread %d writes shared word %d read by thread %d with no barrier between (block %u,%u)", what, tid,
                     i, s.r_tid, g_emu.block_idx.x, g_emu.block_idx.y);
        if (s.w_epoch == g_emu.epoch && s.w_tid != tid)
            emu_fail("%s: thread %d writes shared word %d written by thread %d with no barrier between", what, tid, i, s.w_tid);
        if (s.pending_tid >= 0 && s.pending_tid != tid)
            emu_fail("%s: thread %d writes shared word %d while thread %d's cp.async to it is in flight", what, tid, i,
                     s.pending_tid);
        s.w_epoch = g_emu.epoch;
        s.w_tid = tid;
    }
}

// ----------------------------------------------------------------------------
// scheduling

static void emu_yield(void) {  // back to the scheduler; resumes when this thread is picked again
    EmuThread &t = g_emu.th[g_emu.cur];
    if (!setjmp(t.jb)) longjmp(g_emu.sched, 1);
}

// the last lane of a warp to arrive computes every lane's result
static void emu_warp_op_complete(int w0) {
    EmuThread *L = &g_emu.th[w0];
    const int op = L[0].op;
    for (int t = 0; t < 32; t++)
        if (L[t].op != op) emu_fail("warp %d: lanes at different collective instructions (%d, %d)", w0 / 32, op, L[t].op);
    g_emu.warp_ops++;
    if (op == EMU_OP_LDSM || op == EMU_OP_LDSM_T) {
        uint16_t mat[4][8][8];
        for (int m = 0; m < 4; m++)
            for (int r = 0; r < 8; r++) {
                const int lane = 8 * m + r;
                int w = emu_smem_word(L[lane].addr, 16, 16, "ldmatrix");
                if (w < 0) return;
                emu_check_read(L[lane].tid, w, 4, "ldmatrix");
                memcpy(mat[m][r], L[lane].addr, 16);
            }
        for (int t = 0; t < 32; t++)
            for (int m = 0; m < 4; m++) {
                const int i = t / 4, j = 2 * (t % 4);  // non-trans: row i, columns j, j+1; trans: rows j, j+1 of column i
                L[t].a[m] = op == EMU_OP_LDSM ? emu_pack(mat[m][i][j], mat[m][i][j + 1]) : emu_pack(mat[m][j][i], mat[m][j + 1][i]);
            }
    } else if (op == EMU_OP_MMA) {
        float A[16][16], B[16][8], C[16][8];
        for (int t = 0; t < 32; t++) {
            const int g = t / 4, c = t % 4;
            const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * c, 2 * c, 2 * c + 8, 2 * c + 8};
            for (int r = 0; r < 4; r++) {
                A[ar[r]][ac[r]] = emu_lo(L[t].a[r]);
                A[ar[r]][ac[r] + 1] = emu_hi(L[t].a[r]);
            }
            B[2 * c][g] = emu_lo(L[t].b0); B[2 * c + 1][g] = emu_hi(L[t].b0);
            B[2 * c + 8][g] = emu_lo(L[t].b1); B[2 * c + 9][g] = emu_hi(L[t].b1);
            C[g][2 * c] = L[t].c[0]; C[g][2 * c + 1] = L[t].c[1];
            C[g + 8][2 * c] = L[t].c[2]; C[g + 8][2 * c + 1] = L[t].c[3];
        }
        float D[16][8];
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                float acc = C[i][j];  // bf16 x bf16 products are exact in fp32; summed in k order
                for (int k = 0; k < 16; k++) acc += A[i][k] * B[k][j];
                D[i][j] = acc;
            }
        for (int t = 0; t < 32; t++) {
            const int g = t / 4, c = t % 4;
            L[t].c[0] = D[g][2 * c]; L[t].c[1] = D[g][2 * c + 1];
            L[t].c[2] = D[g + 8][2 * c]; L[t].c[3] = D[g + 8][2 * c + 1];
        }
    } else {  // shfl.xor: every lane reads the value of lane ^ mask
        float v[32];
        for (int t = 0; t < 32; t++) {
            if (L[t].lane_mask != L[0].lane_mask) emu_fail("shfl.xor with different lane masks in one warp");
            v[t] = L[t].f;
        }
        for (int t = 0; t < 32; t++) L[t].f = v[t ^ (L[0].lane_mask & 31)];
    }
    for (int t = 0; t < 32; t++) L[t].state = EMU_RUNNABLE;
}

// a warp-collective instruction of the running thread, its operands already stored
static void emu_warp_op(int op) {
    EmuThread &me = g_emu.th[g_emu.cur];
    me.op = op;
    me.state = EMU_AT_WARP_OP;
    const int w0 = me.tid / 32 * 32;
    int arrived = 0;
    for (int t = w0; t < w0 + 32; t++) {
        if (t >= g_emu.nthreads || g_emu.th[t].state == EMU_DONE) {
            emu_fail("warp %d: a collective instruction with lanes that exited or do not exist", w0 / 32);
            me.state = EMU_RUNNABLE;
            return;
        }
        arrived += g_emu.th[t].state == EMU_AT_WARP_OP;
    }
    if (arrived == 32) emu_warp_op_complete(w0);
    else emu_yield();
}

static void fa_sync(void) {
    EmuThread &me = g_emu.th[g_emu.cur];
    me.state = EMU_AT_BARRIER;
    for (int t = 0; t < g_emu.nthreads; t++)
        if (g_emu.th[t].state != EMU_AT_BARRIER && g_emu.th[t].state != EMU_DONE) { emu_yield(); return; }
    g_emu.epoch++;
    g_emu.barriers++;
    for (int t = 0; t < g_emu.nthreads; t++)
        if (g_emu.th[t].state == EMU_AT_BARRIER) g_emu.th[t].state = EMU_RUNNABLE;
}

// ----------------------------------------------------------------------------
// the kernels' primitives

static void emu_copy_land(EmuThread &t, const EmuCopy &c) {
    const int w = (int)((c.dst - g_emu.smem) / 4), n = c.bytes / 4;
    for (int i = w; i < w + n; i++) g_emu.shadow[i].pending_tid = -1;
    emu_check_write(t.tid, w, n, "cp.async landing");
    memcpy(c.dst, c.src, c.src_bytes);
    memset(c.dst + c.src_bytes, 0, c.bytes - c.src_bytes);
}
static void emu_cp_async(void *smem, const void *gmem, int bytes, int src_bytes) {
    EmuThread &me = g_emu.th[g_emu.cur];
    g_emu.copies++;
    const int w = emu_smem_word(smem, bytes, bytes, "cp.async destination");
    if (w < 0) return;
    if ((uintptr_t)gmem % bytes) { emu_fail("cp.async: global source not %d-byte aligned", bytes); return; }
    if (src_bytes != 0 && src_bytes != bytes) { emu_fail("cp.async: src_bytes %d", src_bytes); return; }
    const char *g = (const char *)gmem;
    int inside = 0;
    for (const EmuRange &r : g_emu.global) inside |= g >= r.p && g + bytes <= r.p + r.n;
    if (!inside) { emu_fail("cp.async: global source %p (+%d bytes) in no input buffer", gmem, bytes); return; }
    emu_check_write(me.tid, w, bytes / 4, "cp.async issue");  // it may land at once: as a write now
    for (int i = w; i < w + bytes / 4; i++) {
        if (g_emu.shadow[i].pending_tid >= 0) emu_fail("cp.async: two copies in flight to shared word %d", i);
        g_emu.shadow[i].pending_tid = me.tid;
    }
    EmuCopy c = {(char *)smem, g, bytes, src_bytes, me.groups};
    if (g_emu.copies_early) emu_copy_land(me, c);
    else me.copies.push_back(c);
}
static void fa_cp_async16(void *smem, const void *gmem, int src_bytes) { emu_cp_async(smem, gmem, 16, src_bytes); }
static void fa_cp_async4(void *smem, const void *gmem, int src_bytes) { emu_cp_async(smem, gmem, 4, src_bytes); }
static void fa_cp_async_commit(void) { g_emu.th[g_emu.cur].groups++; }
// the groups closed before the last N have landed (copies of the open group need not have)
static void emu_cp_async_wait(int N) {
    EmuThread &me = g_emu.th[g_emu.cur];
    std::vector<EmuCopy> keep;
    for (const EmuCopy &c : me.copies) {
        if (c.group < me.groups - N) emu_copy_land(me, c);
        else keep.push_back(c);
    }
    me.copies.swap(keep);
}
template <int N> static void fa_cp_async_wait(void) { emu_cp_async_wait(N); }

static void emu_ldsm(uint32_t r[4], const floatX *p, int op) {
    EmuThread &me = g_emu.th[g_emu.cur];
    me.addr = (const char *)p;
    emu_warp_op(op);
    for (int i = 0; i < 4; i++) r[i] = g_emu.th[g_emu.cur].a[i];
}
static void fa_ldsm_x4(uint32_t r[4], const floatX *p) { emu_ldsm(r, p, EMU_OP_LDSM); }
static void fa_ldsm_x4_trans(uint32_t r[4], const floatX *p) { emu_ldsm(r, p, EMU_OP_LDSM_T); }

static void fa_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    EmuThread &me = g_emu.th[g_emu.cur];
    for (int i = 0; i < 4; i++) { me.a[i] = a[i]; me.c[i] = c[i]; }
    me.b0 = b0;
    me.b1 = b1;
    emu_warp_op(EMU_OP_MMA);
    for (int i = 0; i < 4; i++) c[i] = g_emu.th[g_emu.cur].c[i];
}
static float fa_shfl_xor(float v, int lane_mask) {
    EmuThread &me = g_emu.th[g_emu.cur];
    me.f = v;
    me.lane_mask = lane_mask;
    emu_warp_op(EMU_OP_SHFL);
    return g_emu.th[g_emu.cur].f;
}
// a plain load from shared memory (the kernels' fa_lds): checked for races like ldmatrix
static float fa_lds(const float *p) {
    const int w = emu_smem_word(p, 4, 4, "shared load");
    if (w >= 0) emu_check_read(g_emu.th[g_emu.cur].tid, w, 1, "shared load");
    return *p;
}

// ----------------------------------------------------------------------------
// launching: every block of the grid in turn, each thread on its own stack

static void emu_thread_entry(void) {
    g_emu.body(g_emu.body_arg);
    EmuThread &me = g_emu.th[g_emu.cur];
    emu_cp_async_wait(0);   // what it copied lands even if it never waited
    me.copies.clear();
    me.state = EMU_DONE;
    longjmp(g_emu.sched, 1);
}

// the next thread to run: stay in the current warp while it has a runnable thread, except
// that with switch_percent chance (and always when it has none) move to a random warp that has
static int emu_pick(void) {
    const int nw = (g_emu.nthreads + 31) / 32, cw = g_emu.cur / 32;
    auto runnable_in = [&](int w) {
        for (int t = w * 32; t < std::min(w * 32 + 32, g_emu.nthreads); t++)
            if (g_emu.th[t].state == EMU_RUNNABLE) return t;
        return -1;
    };
    if ((int)(dev_rand_u64() % 100) >= g_emu.switch_percent) {
        const int t = runnable_in(cw);
        if (t >= 0) return t;
    }
    const int start = (int)(dev_rand_u64() % nw);
    for (int i = 0; i < nw; i++) {
        const int t = runnable_in((start + i) % nw);
        if (t >= 0) return t;
    }
    return -1;
}

template <class F> static void emu_body_call(void *f) { (*(F *)f)(); }

// run kernel(...) as the closure f over grid (gx, gy) with `threads` threads per block and
// `smem` bytes of dynamic shared memory
template <class F> static void emu_launch(unsigned gx, unsigned gy, int threads, size_t smem, F f) {
    const size_t stack_bytes = 256 << 10;
    g_emu.nthreads = threads;
    g_emu.th.resize(threads);
    for (int t = 0; t < threads; t++) g_emu.th[t].stack.resize(stack_bytes);
    g_emu.smem_raw.assign(smem + 256, 0);
    g_emu.smem = (char *)(((uintptr_t)g_emu.smem_raw.data() + 127) & ~(uintptr_t)127);
    g_emu.smem_bytes = smem;
    g_emu.grid_dim = {gx, gy, 1};
    g_emu.body = emu_body_call<F>;
    g_emu.body_arg = &f;
    for (unsigned by = 0; by < gy; by++)
        for (unsigned bx = 0; bx < gx; bx++) {
            g_emu.block_idx = {bx, by, 0};
            // shared memory starts as NaN bytes (0xFF), as garbage a kernel must not read
            memset(g_emu.smem, 0xFF, smem);
            g_emu.shadow.assign(smem / 4 + 1, EmuWord{-1, -1, -1, -1, -1});
            g_emu.epoch = 0;
            for (int t = 0; t < threads; t++) {
                EmuThread &th = g_emu.th[t];
                th.tid = t;
                th.state = EMU_RUNNABLE;
                th.copies.clear();
                th.groups = 0;
                th.op = -1;
                getcontext(&th.start);
                th.start.uc_stack.ss_sp = th.stack.data();
                th.start.uc_stack.ss_size = th.stack.size();
                th.start.uc_link = NULL;
                makecontext(&th.start, emu_thread_entry, 0);
            }
            std::vector<char> started(threads, 0);
            g_emu.cur = 0;
            for (;;) {
                const int t = emu_pick();
                if (t < 0) break;
                g_emu.cur = t;
                if (!setjmp(g_emu.sched)) {
                    if (!started[t]) {
                        started[t] = 1;
                        ucontext_t here;
                        swapcontext(&here, &g_emu.th[t].start);  // returns only through longjmp(sched)
                    } else {
                        longjmp(g_emu.th[t].jb, 1);
                    }
                }
            }
            for (int t = 0; t < threads; t++)
                if (g_emu.th[t].state != EMU_DONE) {
                    emu_fail("block %u,%u: deadlock, thread %d waits (state %d)", bx, by, t, g_emu.th[t].state);
                    return;
                }
        }
}
