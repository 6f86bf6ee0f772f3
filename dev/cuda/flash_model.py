#!/usr/bin/env python3
# dev/cuda/flash_model.py: a tile-level numpy model, without a GPU, of the arithmetic of
# cuda/flash_attention.cuh (one head: fp32 scores in log2 units, online softmax over 64-key
# tiles, P and dS rounded to bf16 before their products, fp32 accumulation, lse saved and P
# recomputed from it in the backward, D = rowsum(dO * O)) against float64 attention. It prints
# the metrics of kernel_check.cuh's check_close with the tolerances dev/cuda/flash_attention.cu
# uses, to show the headroom those tolerances leave for bf16 rounding alone. It does not
# run the kernels: dev/cuda/flash_fragments.py checks their fragment layouts, the GPU the rest.
import numpy as np
import sys
rng = np.random.default_rng(0)
failures = 0
def bf16(x):
    x = np.asarray(x, np.float32); u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)
def check(name, got, ref, atol_frac, rtol, nrel_tol):
    got = np.asarray(got, np.float64); ref = np.asarray(ref, np.float64)
    atol = atol_frac * np.abs(ref).max(); d = np.abs(got - ref)
    bad = (d > atol + rtol * np.abs(ref)).sum(); nrel = np.sqrt((d**2).sum() / (ref**2).sum())
    global failures
    ok = bad == 0 and nrel <= nrel_tol
    failures += not ok
    print(f"  {name:10s} max_abs={d.max():.2e} norm_rel={nrel:.2e} bad={bad} (atol {atol:.1e}) {'OK' if ok else 'FAIL'}")

def run(T, hd, Bt=64):
    q, k, v, do = (bf16(rng.standard_normal((T, hd))) for _ in range(4))
    sc = 1 / np.sqrt(hd); L2E = np.float32(1.4426950408889634)
    # reference (double)
    S = (q.astype(np.float64) @ k.T.astype(np.float64)) * sc
    mask = np.tril(np.ones((T, T), bool)); S[~mask] = -np.inf
    m = S.max(1, keepdims=True); P = np.exp(S - m); l = P.sum(1, keepdims=True); P /= l
    lse_ref = (m + np.log(l))[:, 0]; O_ref = P @ v
    dP = do.astype(np.float64) @ v.T; Dd = (P * dP).sum(1, keepdims=True); dS = P * (dP - Dd) * sc
    dq_ref, dk_ref, dv_ref = dS @ k, dS.T @ q, P.T @ do
    # flash model (fp32)
    S32 = (q @ k.T).astype(np.float32) * np.float32(sc * L2E); S32[~mask] = -np.inf
    O = np.zeros((T, hd), np.float32); mm = np.full((T, 1), -np.inf, np.float32); ll = np.zeros((T, 1), np.float32)
    for j in range(0, T, Bt):
        s = S32[:, j:j+Bt]; mn = np.maximum(mm, s.max(1, keepdims=True)); mu = np.where(np.isinf(mn), 0, mn)
        a = np.exp2(mm - mu); p = np.exp2(s - mu); ll = ll * a + p.sum(1, keepdims=True)
        O = O * a + bf16(p) @ v[j:j+Bt]; mm = mn
    O = bf16(O / ll); lse = ((mm + np.log2(ll)) * np.float32(np.log(2)))[:, 0]
    D = (do * O).sum(1, keepdims=True, dtype=np.float32)
    Pf = np.exp2(S32 - (lse * L2E)[:, None]); Pf[~mask] = 0
    dPf = (do @ v.T).astype(np.float32); dSf = Pf * (dPf - D)
    dv = bf16(bf16(Pf).T @ do); dk = bf16((bf16(dSf).T @ q) * np.float32(sc)); dq = bf16((bf16(dSf) @ k) * np.float32(sc))
    print(f"T={T} hd={hd}")
    check("out", O, O_ref, 1e-2, 2e-2, 1e-2); check("lse", lse, lse_ref, 2e-4, 1e-3, 1e-4)
    check("dq", dq, dq_ref, 1e-2, 5e-2, 2e-2); check("dk", dk, dk_ref, 1e-2, 5e-2, 2e-2); check("dv", dv, dv_ref, 1e-2, 5e-2, 2e-2)
for T, hd in [(200, 64), (200, 128), (1024, 64), (1024, 128), (37, 64)]:
    run(T, hd)
print("flash_model:", "OK" if failures == 0 else f"{failures} FAIL")
raise SystemExit(1 if failures else 0)
