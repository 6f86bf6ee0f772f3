#!/usr/bin/env bash
# bench/gpu_train.sh: GPT-2 124M training speed on one GPU, zeroc against PyTorch in the same run.
#   GPU_CHECK_ONLY=build,gpu_train bash scripts/gpu_check.sh      (on the lent GPU machine; builds first)
#   bash bench/gpu_train.sh                                       (binaries already built: make gpu-all)
# Rows (T = 1024, bf16, micro batch 16, one GPU; median step after the 5th):
#   zeroc stage 0, stage 3, stage 2 with optimizer offload, the llama architecture at the same sizes
#   (--breakdown: forward, backward, communication wait, optimizer); and, without --breakdown (its
#   synchronizations would hide what they measure), stage 0 as it is, with --gpu-baseline 1 (the step as
#   first measured: the same-run "before" of issue 10's changes) and with --attention flash;
#   and PyTorch eager and torch.compile
#   (bench/torch_gpt2_speed.py: nanoGPT's GPT-2 with SDPA flash attention, bf16 autocast, fused AdamW).
# FLOP per token: zeroc's model_flops_per_token() (6N + 12LTC) for the gpt2 rows, the torch rows included
# (the same model); MFU against 989 TFLOP/s (H100 SXM dense bf16) or GPU_TRAIN_PEAK.
# Writes bench/gpu_train_<UTC date>_<device>.txt (and $OUT/ when set); its last line:
#   gpu_train: R× torch.compile, MFU P%, zero3 +X%, offload Y×
# R: zeroc stage 0's tokens/s over torch.compile's; X: stage 3's step time over stage 0's, in percent;
# Y: the offload step time over the on-GPU step's.
cd "$(dirname "$0")/.."
nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "SKIP: no GPU found"; exit 77; }
[ -f data/brown/train.bin ] || { echo "SKIP: no data/brown/train.bin (carry data/)"; exit 77; }
for b in gpu_z0_o0 gpu_z3_o0 gpu_z2_o1; do
    [ -x build/$b/train_gpt ] || { echo "error: build/$b/train_gpt missing: make gpu-all first" >&2; exit 1; }
done
PEAK=${GPU_TRAIN_PEAK:-989e12}
STEPS=${GPU_TRAIN_STEPS:-30}
dev=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
tag=$(echo "$dev" | tr -c 'A-Za-z0-9\n' '_' | tr -s '_' | sed 's/_$//')
OUTF="bench/gpu_train_$(date -u +%Y%m%d)_${tag}.txt"
T=$(mktemp -d /tmp/zeroc_gpu_train.XXXXXX); trap 'rm -rf "$T"' EXIT
COMMON="--preset gpt2-124m --batch 16 --seq 1024 --steps $STEPS --lr 6e-4 --warmup 10"
BD="--breakdown 1"   # the per-phase rows; its synchronizations cost time, so the before/after pairs run without it

run_zeroc() {   # NAME BINARY [flags]
    local name=$1 bin=$2; shift 2
    echo "-- $name: $bin $COMMON $*"
    "$bin" $COMMON "$@" --log "$T/$name.jsonl" > "$T/$name.out" 2>&1 || { tail -n 15 "$T/$name.out"; echo "$name|FAILED" >> "$T/rows"; return 1; }
    python3 - "$name" "$T/$name.jsonl" >> "$T/rows" <<'PYEOF'
import json, statistics as st, sys
name, log = sys.argv[1:3]
rows = [r for r in map(json.loads, open(log)) if r.get("type") == "train"]
s = [r for r in rows if r["step"] > 5] or rows
med = lambda k: st.median(r.get(k, 0) for r in s)
def phase(k):   # a --breakdown phase; "" for a run without it
    v = [r[k] for r in s if r.get(k) is not None and r[k] >= 0]
    return "%.1f" % st.median(v) if v else ""
fpt = st.median(r["gflops"] * 1e9 / r["tokens_per_sec"] for r in s)
print("|".join([name, "%.0f" % med("tokens_per_sec"), "%.2f" % med("ms"), "%.6g" % fpt,
                phase("forward_ms"), phase("backward_ms"), phase("comm_wait_ms"), phase("optimizer_ms")]))
PYEOF
}

run_torch() {   # NAME COMPILE
    local name=$1 c=$2
    echo "-- $name: python3 bench/torch_gpt2_speed.py --device cuda --batch 16 --seq 1024 --steps $STEPS --compile $c"
    PYTHONUNBUFFERED=1 python3 bench/torch_gpt2_speed.py --device cuda --batch 16 --seq 1024 --steps "$STEPS" --compile "$c" \
        > "$T/$name.out" 2>&1 || { tail -n 15 "$T/$name.out"; echo "$name|FAILED" >> "$T/rows"; return 1; }
    tail -n 1 "$T/$name.out"
    python3 - "$name" "$T/$name.out" >> "$T/rows" <<'PYEOF'
import re, sys
name, out = sys.argv[1:3]
m = re.search(r"([0-9.]+) tok/s, ([0-9.]+) ms/step", open(out).read().splitlines()[-1])
print("|".join([name, m.group(1), m.group(2), "", "", "", "", ""]))
PYEOF
}

{
echo "zeroc bench/gpu_train.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}, $dev"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
: > "$T/rows"
# the two sides alternate (zeroc, torch, zeroc, torch...) so that a drift of the machine touches both
run_zeroc zeroc_z0 ./build/gpu_z0_o0/train_gpt $BD
run_zeroc z0_plain ./build/gpu_z0_o0/train_gpt
run_zeroc z0_baseline ./build/gpu_z0_o0/train_gpt --gpu-baseline 1
run_torch torch_eager 0
run_zeroc zeroc_z3 ./build/gpu_z3_o0/train_gpt $BD
run_zeroc z0_flash ./build/gpu_z0_o0/train_gpt --attention flash
run_torch torch_compile 1
run_zeroc zeroc_z2_offload ./build/gpu_z2_o1/train_gpt $BD
run_zeroc zeroc_llama ./build/gpu_z0_o0/train_gpt --arch llama $BD
echo
python3 - "$T/rows" "$PEAK" <<'PYEOF'
import sys
rows, peak = {}, float(sys.argv[2])
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("|")
    rows[f[0]] = f
fpt = float(rows["zeroc_z0"][3]) if rows.get("zeroc_z0", [0, "FAILED"])[1] != "FAILED" else 0.0
print("GPT-2 124M (llama: the same sizes, 4 KV heads), B=16 x T=1024, bf16, one GPU; median step after the 5th")
print(f"{'run':<18} {'tok/s':>9} {'ms/step':>8} {'TFLOP/s':>8} {'MFU':>6}  {'fwd':>6} {'bwd':>6} {'comm':>6} {'optim':>6}  (ms)")
tok = {}
for name, f in rows.items():
    if f[1] == "FAILED":
        print(f"{name:<18} FAILED"); continue
    t, ms = float(f[1]), float(f[2])
    tok[name] = (t, ms)
    fl = t * (float(f[3]) if f[3] else fpt)
    br = "  ".join(f"{x:>6}" for x in f[4:8]) if f[4] else "     -       -       -       -"
    print(f"{name:<18} {t:>9.0f} {ms:>8.1f} {fl / 1e12:>8.1f} {100 * fl / peak:>5.1f}%  {br}")
print(f"FLOP/token {fpt:.4g} (zeroc's model_flops_per_token, 6N + 12LTC), used for the torch rows too; MFU against {peak / 1e12:.0f} TFLOP/s")
# the before/after pairs (stage 0, no --breakdown): z0_baseline -> z0_plain, z0_plain -> z0_flash
for before, after, what in (("z0_baseline", "z0_plain", "the step as first measured (--gpu-baseline 1) -> now"),
                            ("z0_plain", "z0_flash", "--attention cublas -> flash")):
    if before in tok and after in tok:
        a, b = tok[before], tok[after]
        print(f"{what}: {b[0] / a[0]:.3f}x tokens/s ({a[1]:.1f} -> {b[1]:.1f} ms/step)")
need = ["zeroc_z0", "zeroc_z3", "zeroc_z2_offload", "torch_compile"]
if all(k in tok for k in need):
    z0, z3, off, tc = (tok[k] for k in need)
    print("gpu_train: %.2f× torch.compile, MFU %.1f%%, zero3 %+.1f%%, offload %.2f×"
          % (z0[0] / tc[0], 100 * z0[0] * fpt / peak, 100 * (z3[1] / z0[1] - 1), off[1] / z0[1]))
else:
    print("gpu_train: incomplete (failed rows: %s)" % ", ".join(k for k in need if k not in tok))
    sys.exit(1)
PYEOF
} 2>&1 | tee "$OUTF"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp "$OUTF" "$OUT/"
exit $rc
