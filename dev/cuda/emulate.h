// dev/cuda/emulate.h: a CUDA grid run on the CPU, one fiber per CUDA thread, so that kernels'
// own code (not a transcription) runs and is checked without a GPU. Two users:
// dev/cuda/flash_emulate.h (the flash attention kernels' PTX wrappers: ldmatrix, mma.sync,
// cp.async) and dev/cuda/emu/cuda_runtime.h (plain CUDA C++: shuffles, __syncthreads, shared
// memory, atomics, the runtime API; dev/cuda/kernels_emulate.cpp).
//
// The machine, from the CUDA programming guide and the PTX ISA:
//   - bf16 values (round to nearest even), the vector types, the thread, block and grid indices;
//   - warp-collective instructions: each lane deposits its operands and waits until all 32 lanes
//     of the warp have arrived at the same instruction; the last one computes every lane's
//     result (shuffles here, flash's ldmatrix and mma through g_emu.warp_hook);
//   - __syncthreads: every thread of the block that has not exited;
//   - dynamic shared memory, checked per 4-byte word where the kernels reach it through the
//     wrappers below (bounds, alignment, races: a read or write by one thread and a write by
//     another with no barrier between).
// Threads run one at a time; which runs next is chosen by a seeded policy (the generator of
// dev/cuda/host_check.h), so that different interleavings of the warps between barriers are
// tried, and blocks run in grid order or shuffled. Atomics are plain read-modify-writes: no two
// threads ever run at once.
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <setjmp.h>
#include <ucontext.h>
#include <vector>
#include <algorithm>
#include <string>
#include "dev/cuda/host_check.h"

// ----------------------------------------------------------------------------
// bf16 and the CUDA vector types

struct __nv_bfloat16 {
    uint16_t bits;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f);   // round to nearest even, as __float2bfloat16_rn
    operator float() const {
        uint32_t u = (uint32_t)bits << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };  // 4-byte aligned as CUDA's

static inline float __bfloat162float(__nv_bfloat16 v) { return (float)v; }
static inline __nv_bfloat16 emu_bf16(float f) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) r.bits = (uint16_t)((u >> 16) | 0x40u);
    else r.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}
inline __nv_bfloat16::__nv_bfloat16(float f) : bits(emu_bf16(f).bits) {}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return emu_bf16(f); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return emu_bf16(f); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    __nv_bfloat162 v;
    v.x = emu_bf16(lo);
    v.y = emu_bf16(hi);
    return v;
}

struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { uint32_t x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { uint32_t x, y; };
struct alignas(8) float2 { float x, y; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

struct EmuDim3 {
    unsigned x, y, z;
    EmuDim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ----------------------------------------------------------------------------
// the emulated machine

enum { EMU_RUNNABLE, EMU_AT_WARP_OP, EMU_AT_BARRIER, EMU_DONE };
// the warp-collective instructions: shuffles here; EMU_OP_USER and above complete in g_emu.warp_hook
enum { EMU_OP_SHFL, EMU_OP_USER };
enum { EMU_SHFL_XOR, EMU_SHFL_DOWN, EMU_SHFL_UP, EMU_SHFL_IDX };

struct EmuCopy { char *dst; const char *src; int bytes, src_bytes, group; };

struct EmuThread {
    int tid, state;
    jmp_buf jb;                          // where the thread continues
    ucontext_t start;                    // its first entry (makecontext)
    char *stack;
    // the warp instruction it waits in, its operands and results
    int op;
    uint64_t val;                        // a shuffle's value (its bits)
    int shfl_kind, shfl_param, shfl_width;
    const char *addr;                    // flash: ldmatrix's row, mma's fragments
    uint32_t a[4], b0, b1;
    float c[4];
    std::vector<EmuCopy> copies;         // flash: cp.async issued, not yet landed
    int groups;                          // flash: cp.async commit groups closed so far
};

// per 4-byte word of dynamic shared memory: the last write (barrier epoch, thread), the reads of
// the current epoch (one thread, or EMU_MANY), and the thread whose cp.async to it is in flight
#define EMU_MANY (-2)
struct EmuWord { int w_epoch, w_tid, r_epoch, r_tid, pending_tid; };

struct EmuRange { const char *p; size_t n; };

struct Emu {
    EmuDim3 block_idx, grid_dim, block_dim;
    int nthreads;
    std::vector<EmuThread> th;
    size_t stack_bytes = 256 << 10;      // each thread's stack
    int cur;                             // the running thread
    jmp_buf sched;
    std::vector<char> smem_raw;
    char *smem;
    size_t smem_bytes;
    std::vector<EmuWord> shadow;
    int epoch;
    void (*body)(void *);                // the kernel call of this launch (a closure)
    void *body_arg;
    // hooks of the users: a warp instruction of their own (op >= EMU_OP_USER, lanes L[0..31]),
    // a thread's exit, a block's start
    void (*warp_hook)(int op, EmuThread *L);
    void (*exit_hook)(EmuThread &t);
    void (*block_hook)(void);
    // policy (the choices draw on dev/cuda/host_check.h's generator)
    int copies_early;                    // flash: 1: cp.async lands when issued; 0: at the wait that needs it
    int switch_percent;                  // chance to move to another warp at each scheduling point
    int shuffle_blocks;                  // 1: the blocks of a grid in a random order
    // results
    long errors;
    std::string first_error;
    std::vector<EmuRange> global;        // flash: buffers cp.async may read
    long warp_ops, barriers, copies, launches;
};
static Emu g_emu;

static void emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
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

// the indices the kernels read
static inline EmuDim3 emu_thread_idx(void) {
    const unsigned t = (unsigned)g_emu.th[g_emu.cur].tid, bx = g_emu.block_dim.x, by = g_emu.block_dim.y;
    return EmuDim3(t % bx, t / bx % by, t / (bx * by));
}
#define threadIdx (emu_thread_idx())
#define blockIdx (g_emu.block_idx)
#define gridDim (g_emu.grid_dim)
#define blockDim (g_emu.block_dim)

// ----------------------------------------------------------------------------
// dynamic shared memory checks

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

// a shuffle's source lane for lane t (CUDA: out of the lane's segment of `width`, its own value)
static int emu_shfl_src(const EmuThread &l, int t) {
    const int w = l.shfl_width, seg = t / w * w, p = l.shfl_param;
    int s = t;
    if (l.shfl_kind == EMU_SHFL_XOR) s = t ^ p;
    else if (l.shfl_kind == EMU_SHFL_DOWN) s = t % w + p < w ? t + p : t;
    else if (l.shfl_kind == EMU_SHFL_UP) s = t % w - p >= 0 ? t - p : t;
    else s = seg + ((p % w) + w) % w;
    return s >= seg && s < seg + w ? s : t;
}

// the last lane of a warp to arrive computes every lane's result
static void emu_warp_op_complete(int w0) {
    EmuThread *L = &g_emu.th[w0];
    const int op = L[0].op;
    for (int t = 0; t < 32; t++)
        if (L[t].op != op) emu_fail("warp %d: lanes at different collective instructions (%d, %d)", w0 / 32, op, L[t].op);
    g_emu.warp_ops++;
    if (op == EMU_OP_SHFL) {
        uint64_t v[32];
        for (int t = 0; t < 32; t++) {
            const EmuThread &l = L[t];
            if (l.shfl_kind != L[0].shfl_kind || l.shfl_width != L[0].shfl_width ||
                (l.shfl_kind != EMU_SHFL_IDX && l.shfl_param != L[0].shfl_param))
                emu_fail("warp %d: a shuffle with different kinds, offsets or widths in one warp", w0 / 32);
            v[t] = L[emu_shfl_src(l, t)].val;
        }
        for (int t = 0; t < 32; t++) L[t].val = v[t];
    } else {
        g_emu.warp_hook(op, L);
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

// a shuffle of a value of up to 8 bytes
template <class T> static T emu_shfl(T v, int kind, int param, int width) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    EmuThread &me = g_emu.th[g_emu.cur];
    me.val = 0;
    memcpy(&me.val, &v, sizeof(T));
    me.shfl_kind = kind;
    me.shfl_param = param;
    me.shfl_width = width;
    emu_warp_op(EMU_OP_SHFL);
    T r;
    memcpy(&r, &g_emu.th[g_emu.cur].val, sizeof(T));
    return r;
}

// __syncthreads
static void emu_syncthreads(void) {
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
// launching: every block of the grid in turn, each thread on its own stack

static void emu_thread_entry(void) {
    g_emu.body(g_emu.body_arg);
    EmuThread &me = g_emu.th[g_emu.cur];
    if (g_emu.exit_hook) g_emu.exit_hook(me);
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

// one block: every thread from its entry until it exits; 0 on a deadlock
static int emu_run_block(void) {
    const int threads = g_emu.nthreads;
    memset(g_emu.smem, 0xFF, g_emu.smem_bytes);   // shared memory starts as NaN bytes, garbage a kernel must not read
    g_emu.shadow.assign(g_emu.smem_bytes / 4 + 1, EmuWord{-1, -1, -1, -1, -1});
    g_emu.epoch = 0;
    if (g_emu.block_hook) g_emu.block_hook();
    for (int t = 0; t < threads; t++) {
        EmuThread &th = g_emu.th[t];
        th.tid = t;
        th.state = EMU_RUNNABLE;
        th.copies.clear();
        th.groups = 0;
        th.op = -1;
        getcontext(&th.start);
        th.start.uc_stack.ss_sp = th.stack;
        th.start.uc_stack.ss_size = g_emu.stack_bytes;
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
            emu_fail("block %u,%u: deadlock, thread %d waits (state %d)", g_emu.block_idx.x, g_emu.block_idx.y, t,
                     g_emu.th[t].state);
            return 0;
        }
    return 1;
}

// run the closure f (a kernel call) over `grid` blocks of `block` threads with `smem` bytes of
// dynamic shared memory
template <class F> static void emu_launch(EmuDim3 grid, EmuDim3 block, size_t smem, F f) {
    const int threads = (int)(block.x * block.y * block.z);
    g_emu.launches++;
    g_emu.nthreads = threads;
    if ((int)g_emu.th.size() < threads) g_emu.th.resize(threads);
    for (int t = 0; t < threads; t++) {   // never freed: each thread's stack serves every launch
        EmuThread &th = g_emu.th[t];
        if (!th.stack) th.stack = (char *)malloc(g_emu.stack_bytes);
    }
    g_emu.smem_raw.assign(smem + 256, 0);
    g_emu.smem = (char *)(((uintptr_t)g_emu.smem_raw.data() + 127) & ~(uintptr_t)127);
    g_emu.smem_bytes = smem;
    g_emu.grid_dim = grid;
    g_emu.block_dim = block;
    g_emu.body = emu_body_call<F>;
    g_emu.body_arg = &f;
    std::vector<EmuDim3> order;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) order.push_back(EmuDim3(bx, by, bz));
    if (g_emu.shuffle_blocks)
        for (size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[dev_rand_u64() % i]);
    for (const EmuDim3 &b : order) {
        g_emu.block_idx = b;
        if (!emu_run_block()) return;
    }
}
