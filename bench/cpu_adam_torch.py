#!/usr/bin/env python3
"""torch.optim.AdamW on the CPU, for bench/cpu_adam.sh.

  cpu_adam_torch.py [--sizes 1e6,1e7,1e8] [--threads 1,2]
      times AdamW.step() on one flat fp32 parameter of n elements (the best case for torch:
      one tensor, no per-tensor overhead), foreach=False (the default on CPU in torch 1.13) and
      foreach=True, with torch.set_num_threads(threads), and with the allocator tuning that
      scripts/train_gpt.py applies to itself (tune_malloc: freed temporaries are kept instead of
      being returned to the OS and faulted in again on the next step). Prints
      RESULT torch_default|torch_foreach <n> <threads> <best s/step> <median s/step> 28
  cpu_adam_torch.py --report FILE
      reads the RESULT lines of build/cpu_adam and of this script from FILE and prints the table.
"""
import argparse
import os
import statistics
import sys
import time


def bench(sizes, threads):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from train_gpt import tune_malloc   # before torch allocates anything: what the reference trainer does
    tune_malloc()
    import torch
    backend = [l.strip() for l in torch.__config__.parallel_info().splitlines() if "parallel backend" in l]
    tuned = "off (ZEROC_MALLOC_TUNING=0)" if os.environ.get("ZEROC_MALLOC_TUNING", "1") == "0" else "on"
    print(f"# torch {torch.__version__}, {backend[0] if backend else ''}, torch.set_num_threads(threads) per row, "
          f"one flat fp32 parameter of n elements, scripts/train_gpt.py's allocator tuning {tuned}")
    for n in sizes:
        reps = 30 if n <= 1_000_000 else 10 if n <= 10_000_000 else 6
        for nt in threads:
            torch.set_num_threads(nt)
            for foreach in (False, True):
                g = torch.Generator().manual_seed(1)
                p = torch.nn.Parameter((torch.rand(n, generator=g) - 0.5) * 0.1)
                p.grad = (torch.rand(n, generator=g) - 0.5) * 0.02
                opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                        foreach=foreach)
                opt.step()   # allocates the state
                opt.step()
                ts = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    opt.step()
                    ts.append(time.perf_counter() - t0)
                kind = "torch_foreach" if foreach else "torch_default"
                print(f"RESULT {kind} {n} {nt} {min(ts):.6e} {statistics.median(ts):.6e} 28", flush=True)
                del opt, p


def report(path):
    best, med = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) == 7 and f[0] == "RESULT":
            key = (f[1], int(f[2]), int(f[3]))
            best[key], med[key] = float(f[4]), float(f[5])
    sizes = sorted({k[1] for k in best if k[0] == "ours_f32"})
    threads = sorted({k[2] for k in best if k[0] == "ours_f32"})
    # bytes each kind really moves per element: ours reads p g m v and writes p m v (28 B; its writes go to
    # lines it has just read); the plain triad reads b c, writes a and pays a's write-allocate read (16 B);
    # the non-temporal triad reads b c and writes a without reading it (12 B)
    bytes_per = {"ours_f32": 28, "ours_bf16": 28, "triad": 16, "triad_nt": 12}

    def gbs(kind, n, t):
        k = (kind, n, t)
        return n * bytes_per[kind] / best[k] / 1e9 if k in best else float("nan")

    def limit(n, t):   # the machine's stream bandwidth: the faster triad, its real traffic counted
        return max(x for x in (gbs("triad", n, t), gbs("triad_nt", n, t)) if x == x)

    def ms(kind, n, t):
        k = (kind, n, t)
        return best[k] * 1e3 if k in best else float("nan")

    print("Best of several steps per cell. Bytes per parameter, all counted: ours 28 B (reads p g m v, writes p m v,")
    print("to lines it has just read; the +bf16 column reads a 2 B bf16 grad and writes a 2 B bf16 param copy: 28 B too);")
    print("triad a = b + s*c: 16 B (reads b c, writes a after its write-allocate read), NT triad (streaming stores): 12 B.")
    print("stream = the faster triad's GB/s = the machine's measured bandwidth; %stream = ours fp32 GB/s / stream.")
    print("x torch = torch.optim.AdamW step time / ours (fp32 grads), foreach=False and foreach=True, same allocator tuning.")
    print()
    hdr = (f"{'params':>9} {'thr':>3} | {'Mparam/s':>8} {'ours GB/s':>9} {'+bf16':>6} | {'triad':>6} {'NT':>6} "
           f"{'%stream':>7} | {'torch ms':>9} {'foreach':>8} {'ours ms':>8} | {'x torch':>7} {'x foreach':>9}")
    print(hdr)
    print("-" * len(hdr))
    for n in sizes:
        for t in threads:
            ours = best[("ours_f32", n, t)]
            td, tf = ms("torch_default", n, t), ms("torch_foreach", n, t)
            pct = 100 * gbs("ours_f32", n, t) / limit(n, t)
            print(f"{n:>9} {t:>3} | {n / ours / 1e6:>8.0f} {gbs('ours_f32', n, t):>9.1f} {gbs('ours_bf16', n, t):>6.1f} | "
                  f"{gbs('triad', n, t):>6.1f} {gbs('triad_nt', n, t):>6.1f} {pct:>6.0f}% | "
                  f"{td:>9.2f} {tf:>8.2f} {ours * 1e3:>8.2f} | {td / (ours * 1e3):>6.1f}x {tf / (ours * 1e3):>8.1f}x")
    n, t = max(sizes), max(threads)
    ours = best[("ours_f32", n, t)]
    td, tf = ms("torch_default", n, t), ms("torch_foreach", n, t)
    pct = 100 * gbs("ours_f32", n, t) / limit(n, t)
    print()
    print(f"n={n}, {t} threads, medians: ours {med[('ours_f32', n, t)] * 1e3:.2f} ms, triad {med[('triad', n, t)] * 1e3:.2f} ms, "
          f"NT triad {med[('triad_nt', n, t)] * 1e3:.2f} ms"
          + (f", torch {med[('torch_default', n, t)] * 1e3:.2f} ms" if ('torch_default', n, t) in med else ""))
    print(f"cpu_adam: {td / (ours * 1e3):.1f}x torch AdamW (foreach=False), {tf / (ours * 1e3):.1f}x (foreach=True), "
          f"{gbs('ours_f32', n, t):.1f} GB/s at 28 B/param = {pct:.0f}% of the stream bandwidth ({limit(n, t):.1f} GB/s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--report")
    a = ap.parse_args()
    if a.report:
        report(a.report)
        return
    bench([int(float(x)) for x in a.sizes.split(",")], [int(x) for x in a.threads.split(",")])


if __name__ == "__main__":
    sys.exit(main())
