#!/usr/bin/env bash
# bench/gpu_train.sh: GPT-2 124M training speed on one GPU (T = 1024, bf16, micro batch 16; median step
# after the 5th), zeroc's rows and PyTorch's, parsed and tabled in one place.
#   bash bench/gpu_train.sh [pairs|torch|llmc|stages|offload|all]   (binaries built: make gpu-all; default all)
#   scripts/gpu_check.sh runs `pairs`, `llmc` and `torch` as three of its stages (speed, llmc, torch), `stages`
#   when named
# pairs   stage 0 without --breakdown (its synchronizations would hide what they measure): the default
#         (the step the H100 validated on 2026-11-22), each opt-in path alone (--attention flash,
#         --lean-step 1, --fuse-residual 1, --device-loss 1, --plan-cache 1, --bias-grad-epilogue 1), all of
#         them at once, and the default again (the machine's drift over the pairs)
# torch   PyTorch eager and torch.compile (bench/torch_gpt2_speed.py: nanoGPT's GPT-2 with SDPA flash
#         attention, bf16 autocast, fused AdamW) on the same GPU and model, with the library path PyTorch
#         had before scripts/gpu_env.sh (its zeroc_torch): never the toolkit's or .gpu_deps' libraries
# llmc    llm.c's train_gpt2cu (bench/llmc_build.sh into LLMC_DIR, default build/llmc) on the same GPU and
#         model: GPT-2 124M from random weights (-e d12) on the Brown data (zeroc's shards are llm.c's
#         format: dataloader.h), B=16, T=1024, no recompute (-r 0), 30 steps; its median step after the
#         5th, as the zeroc rows
# stages  with --breakdown (forward, backward, communication wait, optimizer): stage 0, stage 3, stage 2
#         with optimizer offload, the llama architecture at the same sizes; memory against speed:
#         --recompute 1, and with --cpu-checkpointing 1 (each row's GPU memory)
# offload ZeRO-Offload at stage 2 against no offload: CPU-Adam after the step, with the delayed parameter update
#         (--offload-dpu 1 --dpu-warmup 5: CPU-Adam beside the next step from update 6 on); and at stage 3
#         Twin-Flow against no offload: ratio 1 (all of it on CPU-Adam), 0.5 and 0.25, in sub-groups of 1e7
#         elements (about 12 for GPT-2 124M; DeepSpeed's default 1e9 would be one group, all on the host);
#         each row's ratio to no offload at its stage
# Rows collect in $GPU_TRAIN_ROWS (a file; default one for this run alone), so that two invocations
# (gpu_check's speed and torch stages) make one table; each invocation prints the table of every row so
# far, the pairs' ratios, and its last line:
#   gpu_train: default A tok/s, opt-in paths B tok/s (B/A), torch.compile C tok/s; best zeroc / torch.compile R×,
#   / llm.c on this GPU L× (else / llm.c's 471,000 per H100), MFU P%; drift D%
# Every run has its own limit (GPU_TRAIN_RUN_TIMEOUT, default 60 s; torch.compile's GPU_TRAIN_TORCH_TIMEOUT,
# 150 s): a run past it is a FAILED row, "timed out", and the rows after it still run.
# FLOP per token: zeroc's model_flops_per_token() (6N + 12LTC) for every row, the torch rows included (the
# same model); MFU against 989 TFLOP/s (H100/H200 dense bf16) or GPU_TRAIN_PEAK. The record goes to
# bench/gpu_train_<UTC date>_<device>.txt (appended to by each invocation) and, as it is written, to $OUT/.
cd "$(dirname "$0")/.." || exit 1
what=${1:-all}
case $what in pairs|torch|llmc|stages|offload|all) ;; *) echo "error: bench/gpu_train.sh: unknown row set '$what' (pairs, torch, llmc, stages, offload, all)" >&2; exit 2;; esac
timeout 20 nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "SKIP: no GPU found"; exit 77; }
[ -f data/brown/train.bin ] || { echo "SKIP: no data/brown/train.bin (carry data/)"; exit 77; }
PEAK=${GPU_TRAIN_PEAK:-989e12}
STEPS=${GPU_TRAIN_STEPS:-20}
# the zeroc rows' model and batch (GPU_TRAIN_SHAPE: tests/test_gpu_dryrun.sh's small stand-in shape)
SHAPE=${GPU_TRAIN_SHAPE:---preset gpt2-124m --batch 16 --seq 1024}
LLM_C=471000   # llm.c's GPT-2 124M tokens/s per H100 (8xH100, 64x1024 tokens per GPU, 139 ms median step)
dev=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
tag=$(echo "$dev" | tr -c 'A-Za-z0-9\n' '_' | tr -s '_' | sed 's/_$//')
OUTF="bench/gpu_train_$(date -u +%Y%m%d)_${tag}.txt"
T=$(mktemp -d /tmp/zeroc_gpu_train.XXXXXX); trap 'rm -rf "$T"' EXIT
ROWS=${GPU_TRAIN_ROWS:-$T/rows}
touch "$ROWS"
PY=python3
RUN_T=${GPU_TRAIN_RUN_TIMEOUT:-60}
TORCH_SPEED=${GPU_TRAIN_TORCH_SCRIPT:-bench/torch_gpt2_speed.py}   # (tests/test_gpu_dryrun.sh: a stand-in)
LLMC_DIR=${LLMC_DIR:-build/llmc}
COMMON="$SHAPE --steps $STEPS --lr 6e-4 --warmup 10"
# PyTorch with the library path it had before scripts/gpu_env.sh, where that was sourced
declare -F zeroc_torch > /dev/null || zeroc_torch() { "$@"; }
. scripts/gpu_paths.sh   # NEW_PATHS
rc_all=0

# one zeroc row: NAME BINARY [flags]; appends "name|tok/s|ms|FLOP per token|fwd|bwd|comm|optim|GiB|flags" to $ROWS
run_zeroc() {
    local name=$1 bin=$2; shift 2
    echo "-- $name: $bin $COMMON $*"
    timeout -k 5 "$RUN_T" "$bin" $COMMON "$@" --log "$T/$name.jsonl" > "$T/$name.out" 2>&1
    local rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "   timed out after ${RUN_T}s"
    [ $rc -eq 0 ] || { tail -n 15 "$T/$name.out"; echo "$name|FAILED|||||||||$*" >> "$ROWS"; rc_all=1; return 1; }
    grep -E "^step +[0-9]+/" "$T/$name.out" | sed -n '1p;$p'
    "$PY" - "$name" "$T/$name.jsonl" "$*" >> "$ROWS" <<'PYEOF'
import json, statistics as st, sys
name, log, flags = sys.argv[1:4]
recs = list(map(json.loads, open(log)))
rows = [r for r in recs if r.get("type") == "train"]
s = [r for r in rows if r["step"] > 5] or rows   # the first steps warm up cuBLAS, the allocator, lazy module loading
med = lambda k: st.median(r.get(k, 0) for r in s)
def phase(k):   # a --breakdown phase; "" for a run without it
    v = [r[k] for r in s if r.get(k) is not None and r[k] >= 0]
    return "%.1f" % st.median(v) if v else ""
fpt = st.median(r["gflops"] * 1e9 / r["tokens_per_sec"] for r in s)
mem = max([r.get("mem_bytes", 0) for r in rows] + [r.get("device_used_bytes", 0) for r in recs if r.get("type") == "memory"])
print("|".join([name, "%.0f" % med("tokens_per_sec"), "%.2f" % med("ms"), "%.6g" % fpt, phase("forward_ms"),
                phase("backward_ms"), phase("comm_wait_ms"), phase("optimizer_ms"), "%.1f" % (mem / 2**30), flags]))
PYEOF
}

# one PyTorch row: NAME COMPILE
run_torch() {
    local name=$1 c=$2
    local t=${GPU_TRAIN_TORCH_TIMEOUT:-150}
    [ "$c" = 1 ] || t=$RUN_T
    echo "-- $name: python3 $TORCH_SPEED --device cuda --batch 16 --seq 1024 --steps $STEPS --compile $c"
    PYTHONUNBUFFERED=1 zeroc_torch timeout -k 5 "$t" "$PY" "$TORCH_SPEED" --device cuda --batch 16 --seq 1024 --steps "$STEPS" \
        --compile "$c" > "$T/$name.out" 2>&1
    local rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "   timed out after ${t}s"
    [ $rc -eq 0 ] || { tail -n 15 "$T/$name.out"; echo "$name|FAILED|||||||||" >> "$ROWS"; rc_all=1; return 1; }
    tail -n 1 "$T/$name.out"
    "$PY" - "$name" "$T/$name.out" >> "$ROWS" <<'PYEOF'
import re, sys
name, out = sys.argv[1:3]
m = re.search(r"([0-9.]+) tok/s, ([0-9.]+) ms/step", open(out).read().splitlines()[-1])
print("|".join([name, m.group(1), m.group(2), "", "", "", "", "", "", "torch"]))
PYEOF
}

# llm.c's row: train_gpt2cu from LLMC_DIR (bench/llmc_build.sh); its step lines give ms per step
run_llmc() {
    local bin=$LLMC_DIR/train_gpt2cu att lib
    [ -x "$bin" ] || { echo "-- llmc: no $bin (bench/llmc_build.sh)"; echo "llmc|FAILED|||||||||not built" >> "$ROWS"; rc_all=1; return 1; }
    att=$(cat "$LLMC_DIR/attention" 2>/dev/null)
    lib=$(cat "$LLMC_DIR/lib_path" 2>/dev/null)
    local F=(-i data/brown/train.bin -j data/brown/val.bin -e d12 -b "${LLMC_B:-16}" -t "${LLMC_T:-1024}"
             -d $(( ${LLMC_B:-16} * ${LLMC_T:-1024} )) -x "${LLMC_STEPS:-30}" -v 1000 -m 2 -s 0 -n 0 -r 0 -l 6e-4 -u 10 -c 0.1)
    echo "-- llmc ($att attention): $bin ${F[*]}"
    LD_LIBRARY_PATH="${lib:+$lib:}${LD_LIBRARY_PATH:-}" timeout -k 5 "$RUN_T" "$bin" "${F[@]}" > "$T/llmc.out" 2>&1
    local rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "   timed out after ${RUN_T}s"
    [ $rc -eq 0 ] || { tail -n 15 "$T/llmc.out"; echo "llmc|FAILED|||||||||$att attention" >> "$ROWS"; rc_all=1; return 1; }
    grep -E "^step +[0-9]+/" "$T/llmc.out" | sed -n '1p;$p'
    "$PY" - "$T/llmc.out" "${LLMC_B:-16}" "${LLMC_T:-1024}" "$att" >> "$ROWS" <<'PYEOF'
import re, statistics as st, sys
out, B, T, att = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
steps = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"^step +(\d+)/\d+ \|.*?\| ([0-9.]+) ms \|", open(out).read(), re.M)]
ms = st.median(t for s, t in steps if s > 5) if any(s > 5 for s, _ in steps) else st.median(t for _, t in steps)
print("|".join(["llmc", "%.0f" % (B * T / ms * 1e3), "%.2f" % ms, "", "", "", "", "", "", "llm.c f1e2ace, %s attention, -r 0" % att]))
PYEOF
}

{
echo "zeroc bench/gpu_train.sh $what: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}, $dev"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
Z0=./build/gpu_z0_o0/train_gpt
for b in "$Z0" ./build/gpu_z3_o0/train_gpt ./build/gpu_z2_o1/train_gpt ./build/gpu_z3_o1/train_gpt; do
    [ "$what" = torch ] || [ "$what" = llmc ] || [ -x "$b" ] || { echo "error: $b missing: make gpu-all first"; exit 1; }
done
if [ "$what" = pairs ] || [ "$what" = all ]; then
    run_zeroc default "$Z0"
    run_zeroc flash "$Z0" --attention flash
    run_zeroc lean_step "$Z0" --lean-step 1
    run_zeroc fuse_residual "$Z0" --fuse-residual 1
    run_zeroc device_loss "$Z0" --device-loss 1
    run_zeroc plan_cache "$Z0" --plan-cache 1
    run_zeroc bias_grad "$Z0" --bias-grad-epilogue 1
    run_zeroc opt_in_all "$Z0" $NEW_PATHS
    run_zeroc default_again "$Z0"
fi
if [ "$what" = llmc ] || [ "$what" = all ]; then
    run_llmc
fi
if [ "$what" = torch ] || [ "$what" = all ]; then
    run_torch torch_eager 0
    run_torch torch_compile 1
fi
if [ "$what" = stages ] || [ "$what" = all ]; then
    run_zeroc z0_breakdown "$Z0" --breakdown 1
    run_zeroc z3_breakdown ./build/gpu_z3_o0/train_gpt --breakdown 1
    run_zeroc z2_offload ./build/gpu_z2_o1/train_gpt --breakdown 1
    run_zeroc llama "$Z0" --arch llama --breakdown 1
    run_zeroc recompute "$Z0" --recompute 1
    run_zeroc cpu_ckpt "$Z0" --recompute 1 --cpu-checkpointing 1
fi
if [ "$what" = offload ] || [ "$what" = all ]; then
    run_zeroc z2_no_offload ./build/gpu_z2_o0/train_gpt
    run_zeroc z2_offload ./build/gpu_z2_o1/train_gpt --offload 1
    run_zeroc z2_offload_dpu ./build/gpu_z2_o1/train_gpt --offload 1 --offload-dpu 1 --dpu-warmup 5
    run_zeroc z3_no_offload ./build/gpu_z3_o0/train_gpt
    for r in 1 0.5 0.25; do
        run_zeroc "z3_twin_$r" ./build/gpu_z3_o1/train_gpt --offload 1 --offload-ratio "$r" --sub-group-size 10000000
    done
fi
echo
"$PY" - "$ROWS" "$PEAK" "$LLM_C" "$SHAPE" <<'PYEOF'
import sys
path, peak, llmc, shape = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = {}
for line in open(path):
    f = line.rstrip("\n").split("|")
    rows[f[0]] = f
fpt = next((float(f[3]) for f in rows.values() if f[1] != "FAILED" and f[3]), 0.0)
print(f"zeroc: {shape}, one GPU, median step after the 5th; torch: bench/torch_gpt2_speed.py, B=16 T=1024; llmc: llm.c's train_gpt2cu, B=16 T=1024")
print(f"{'run':<15} {'tok/s':>9} {'ms/step':>8} {'TFLOP/s':>8} {'MFU':>6}  {'fwd':>6} {'bwd':>6} {'comm':>6} {'optim':>6} {'GiB':>5}  flags")
tok = {}
for name, f in rows.items():
    if f[1] == "FAILED":
        print(f"{name:<15} FAILED  {f[9] if len(f) > 9 else ''}"); continue
    t, ms = float(f[1]), float(f[2])
    tok[name] = (t, ms)
    fl = t * (float(f[3]) if f[3] else fpt)
    br = "  ".join(f"{x:>6}" for x in f[4:8]) if f[4] else "     -       -       -       -"
    print(f"{name:<15} {t:>9.0f} {ms:>8.1f} {fl / 1e12:>8.1f} {100 * fl / peak:>5.1f}%  {br} {f[8] or '-':>5}  {f[9]}")
print(f"FLOP/token {fpt:.4g} (zeroc's model_flops_per_token, 6N + 12LTC), the torch rows' too; MFU against {peak / 1e12:.0f} TFLOP/s")
# each opt-in path against the default, measured in the same run (the default's tokens/s: the mean of its two rows)
base = [tok[k][0] for k in ("default", "default_again") if k in tok]
if base:
    b = sum(base) / len(base)
    for k in ("flash", "lean_step", "fuse_residual", "device_loss", "plan_cache", "bias_grad", "opt_in_all"):
        if k in tok:
            print(f"pair: default -> {k}: {tok[k][0] / b:.3f}x tokens/s ({b:.0f} -> {tok[k][0]:.0f})")
    if len(base) == 2:
        print(f"drift: default {base[0]:.0f} -> default again {base[1]:.0f} tok/s ({100 * (base[1] / base[0] - 1):+.1f}%)")
# ZeRO-Offload's rows against no offload at their stage (the target: DPU at >= 0.8x)
for k in ("z2_offload", "z2_offload_dpu", "z3_twin_1", "z3_twin_0.5", "z3_twin_0.25"):
    base = k[:3] + "no_offload"
    if k in tok and base in tok:
        print(f"offload: {k} / {base}: {tok[k][0] / tok[base][0]:.3f}x tokens/s ({tok[base][0]:.0f} -> {tok[k][0]:.0f})")
zs = {k: v[0] for k, v in tok.items() if not k.startswith("torch") and k != "llmc"}
if "llmc" in tok and zs:
    best = max(zs, key=zs.get)
    print(f"llm.c on this GPU: {tok['llmc'][0]:.0f} tok/s; zeroc / llm.c: " + ", ".join(
        f"{k} {zs[k] / tok['llmc'][0]:.3f}x" for k in ("default", best) if k in zs))
parts = []
if "default" in tok: parts.append(f"default {tok['default'][0]:.0f} tok/s")
if "opt_in_all" in tok and "default" in tok:
    parts.append(f"opt-in paths {tok['opt_in_all'][0]:.0f} tok/s ({tok['opt_in_all'][0] / tok['default'][0]:.2f}x)")
if "torch_compile" in tok: parts.append(f"torch.compile {tok['torch_compile'][0]:.0f} tok/s")
if zs:
    best = max(zs, key=zs.get)
    if "torch_compile" in tok: parts.append(f"best zeroc ({best}) / torch.compile {zs[best] / tok['torch_compile'][0]:.2f}x")
    if "llmc" in tok: parts.append(f"/ llm.c on this GPU {zs[best] / tok['llmc'][0]:.2f}x")
    else: parts.append(f"/ llm.c's {llmc:,.0f} per H100 {zs[best] / llmc:.2f}x")
    parts.append(f"MFU {100 * zs[best] * fpt / peak:.1f}%")
if "default" in tok and "default_again" in tok:
    parts.append(f"drift {100 * (tok['default_again'][0] / tok['default'][0] - 1):+.1f}%")
print("gpu_train: " + (", ".join(parts) if parts else "no rows"))
PYEOF
exit $rc_all
} 2>&1 | tee -a "$OUTF" ${OUT:+"$OUT/$(basename "$OUTF")"}
exit "${PIPESTATUS[0]}"
