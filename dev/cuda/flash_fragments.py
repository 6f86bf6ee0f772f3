#!/usr/bin/env python3
# dev/cuda/flash_fragments.py: a lane-by-lane emulation, without a GPU, of the tensor-core
# fragment helpers of cuda/flash_attention.cuh (fa_load_a, fa_load_b_nt, fa_load_b_nn,
# fa_mma_abt, fa_mma_pv), using the PTX ISA's semantics of ldmatrix (.x4, with and without
# .trans) and mma.sync.m16n8k16 (fragment layouts of "Matrix Fragments for mma.m16n8k16").
# It checks that the per-lane shared-memory addresses written in the header give
#   fa_mma_abt: acc = A X^T   and   fa_mma_pv: acc = P X  (P passed as accumulator fragments)
# for the tile shapes the kernels use. The address formulas below are copied from the header:
# change them together. Run: python3 dev/cuda/flash_fragments.py (exit 1 on a mismatch).
import sys
import numpy as np
rng = np.random.default_rng(1)

def ldsm(s, addr, trans):  # s: 2D smem array; addr[lane] = (row, col) of row start given by lane
    regs = [[None]*4 for _ in range(32)]
    for m in range(4):
        mat = np.array([s[addr[8*m+r][0], addr[8*m+r][1]:addr[8*m+r][1]+8] for r in range(8)])
        if trans: mat = mat.T
        for t in range(32):
            regs[t][m] = (mat[t//4, 2*(t%4)], mat[t//4, 2*(t%4)+1])
    return regs

def mma(c, a, b0, b1):  # per-lane lists; returns new c
    A = np.zeros((16,16)); B = np.zeros((16,8)); C = np.zeros((16,8))
    for t in range(32):
        g, q = t//4, t%4
        for r,(ro,co) in enumerate([(0,0),(8,0),(0,8),(8,8)]):
            A[g+ro, 2*q+co], A[g+ro, 2*q+co+1] = a[t][r]
        B[2*q, g], B[2*q+1, g] = b0[t]; B[2*q+8, g], B[2*q+9, g] = b1[t]
        C[g, 2*q], C[g, 2*q+1], C[g+8, 2*q], C[g+8, 2*q+1] = c[t]
    D = C + A @ B
    return [(D[t//4, 2*(t%4)], D[t//4, 2*(t%4)+1], D[t//4+8, 2*(t%4)], D[t//4+8, 2*(t%4)+1]) for t in range(32)]

# the address formulas of cuda/flash_attention.cuh
def load_a(s, r0, k0):    return ldsm(s, [(r0 + (l % 16), k0 + (l // 16) * 8) for l in range(32)], False)
def load_b_nt(s, n0, k0): return ldsm(s, [(n0 + (l % 8) + (l // 16) * 8, k0 + ((l // 8) % 2) * 8) for l in range(32)], False)
def load_b_nn(s, k0, n0): return ldsm(s, [(k0 + (l % 8) + ((l // 8) % 2) * 8, n0 + (l // 16) * 8) for l in range(32)], True)

def mma_abt(HD, N, sA, a_r0, sX, x_r0):
    acc = [[(0.,0.,0.,0.) for _ in range(32)] for _ in range(N//8)]
    for k in range(HD//16):
        a = load_a(sA, a_r0, k*16)
        for n in range(N//16):
            b = load_b_nt(sX, x_r0 + n*16, k*16)
            acc[2*n] = mma(acc[2*n], a, [b[t][0] for t in range(32)], [b[t][1] for t in range(32)])
            acc[2*n+1] = mma(acc[2*n+1], a, [b[t][2] for t in range(32)], [b[t][3] for t in range(32)])
    return acc

def mma_pv(HD, K, acc, p, sX, x_r0):
    for k in range(K//16):
        a = [((p[2*k][t][0], p[2*k][t][1]), (p[2*k][t][2], p[2*k][t][3]), (p[2*k+1][t][0], p[2*k+1][t][1]), (p[2*k+1][t][2], p[2*k+1][t][3])) for t in range(32)]
        for n in range(HD//16):
            b = load_b_nn(sX, x_r0 + k*16, n*16)
            acc[2*n] = mma(acc[2*n], a, [b[t][0] for t in range(32)], [b[t][1] for t in range(32)])
            acc[2*n+1] = mma(acc[2*n+1], a, [b[t][2] for t in range(32)], [b[t][3] for t in range(32)])
    return acc

def frag_to_mat(acc):  # C fragments of N/8 tiles -> 16 x N
    N = 8*len(acc); M = np.zeros((16, N))
    for n in range(len(acc)):
        for t in range(32):
            g, q = t//4, t%4
            M[g, 8*n+2*q], M[g, 8*n+2*q+1], M[g+8, 8*n+2*q], M[g+8, 8*n+2*q+1] = acc[n][t]
    return M

worst = 0.0
for HD, N in [(64, 64), (128, 64), (128, 32)]:  # forward/dQ (N = 64 keys), dK/dV at hd 128 (32 queries)
    sA = rng.standard_normal((64, HD)); sX = rng.standard_normal((64, HD)); sV = rng.standard_normal((64, HD))
    warp = 2
    S = frag_to_mat(mma_abt(HD, N, sA, warp*16, sX, 0))
    ref = sA[warp*16:warp*16+16] @ sX[0:N].T
    e1 = np.abs(S - ref).max()
    acc = [[(0.,0.,0.,0.) for _ in range(32)] for _ in range(HD//8)]
    p = mma_abt(HD, N, sA, warp*16, sX, 0)
    O = frag_to_mat(mma_pv(HD, N, acc, p, sV, 0))
    e2 = np.abs(O - S @ sV[0:N]).max()
    print(f"hd={HD} N={N}: fa_mma_abt max err {e1:.1e}, fa_mma_pv max err {e2:.1e}")
    worst = max(worst, e1, e2)
ok = worst < 1e-9
print("flash_fragments:", "OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
