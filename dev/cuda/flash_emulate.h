// dev/cuda/flash_emulate.h: CPU stand-ins for the hardware the kernels of
// cuda/flash_attention.cuh reach, so that those kernels' own code (not a transcription) runs
// on the CPU, one CUDA thread per fiber of dev/cuda/emulate.h (dev/cuda/flash_emulate.cpp).
//
// Include this file before cuda/flash_attention.cuh; it defines FLASH_EMULATE, which makes
// the header take these definitions instead of its PTX wrappers and leave out its host
// launchers. What is emulated, from the PTX ISA ("ldmatrix", "mma.m16n8k16" fragment
// layouts, "cp.async", "cp.async.wait_group"), on top of dev/cuda/emulate.h's machine
// (bf16, indices, shfl.xor, __syncthreads, dynamic shared memory):
//   - ldmatrix .x4 with and without .trans, mma.sync m16n8k16 bf16 -> fp32: warp-collective;
//   - cp.async: each copy is queued with its commit group and lands when the issuing thread's
//     wait_group lets it (or at once: emu_copies_early), zero-filled when src_bytes is 0.
// Checked on every access (each failure is counted in g_emu.errors with its first message):
//   - shared memory: bounds, alignment (16 B for ldmatrix rows and 16-byte copies), and races:
//     per 4-byte word, a read or write by one thread and a write by another with no barrier
//     between them; a read of a word whose cp.async has not been waited for (by any thread);
//   - global memory read by cp.async: inside a buffer registered with emu_register.
// Plain C++ loads and stores of global memory are the kernels' own code on host memory
// (an out-of-bounds access there is for AddressSanitizer: tests build with -fsanitize=address).
#pragma once
#include "dev/cuda/emulate.h"

#define FLASH_EMULATE 1
#define __device__
#define __host__
#define __forceinline__ inline
#define FA_KERNEL(threads, min_blocks) void

typedef __nv_bfloat16 floatX;
#define fa_smem ((void *)g_emu.smem)

static inline float emu_lo(uint32_t r) { __nv_bfloat16 b; b.bits = (uint16_t)(r & 0xffff); return __bfloat162float(b); }
static inline float emu_hi(uint32_t r) { __nv_bfloat16 b; b.bits = (uint16_t)(r >> 16); return __bfloat162float(b); }
static inline uint32_t emu_pack(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

enum { EMU_OP_LDSM = EMU_OP_USER, EMU_OP_LDSM_T, EMU_OP_MMA };

static void emu_register(const void *p, size_t bytes) { g_emu.global.push_back({(const char *)p, bytes}); }
static void fa_sync(void) { emu_syncthreads(); }

// flash's warp instructions, completed by the last lane to arrive (g_emu.warp_hook)
static void flash_warp_op_complete(int op, EmuThread *L) {
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
    }
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
static float fa_shfl_xor(float v, int lane_mask) { return emu_shfl(v, EMU_SHFL_XOR, lane_mask, 32); }
// a plain load from shared memory (the kernels' fa_lds): checked for races like ldmatrix
static float fa_lds(const float *p) {
    const int w = emu_smem_word(p, 4, 4, "shared load");
    if (w >= 0) emu_check_read(g_emu.th[g_emu.cur].tid, w, 1, "shared load");
    return *p;
}

// what a thread copied lands even if it never waited
static void flash_thread_exit(EmuThread &t) {
    emu_cp_async_wait(0);
    t.copies.clear();
}
static struct FlashEmuHooks {
    FlashEmuHooks() {
        g_emu.warp_hook = flash_warp_op_complete;
        g_emu.exit_hook = flash_thread_exit;
    }
} g_flash_emu_hooks;
