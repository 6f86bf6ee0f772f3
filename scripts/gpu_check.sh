#!/usr/bin/env bash
# scripts/gpu_check.sh: everything there is to check on a lent GPU machine (H100/H200), in one
# command that ends within 9 minutes:
#   1. our Debian build dependencies from .gpu_deps/ (scripts/gpu_env.sh), the CUDA libraries
#      (NCCL and cuBLAS from the toolkit, else from the Python wheels), versions
#   2. build for sm_90: every train_gpt variant, test_gpt, the CPU trainer, dev/cuda programs
#   3. tests/test_gpu.sh: test_gpt vs PyTorch (gpt2, llama), GPU vs CPU, resume bitwise,
#      ZeRO stages and offload on one GPU, 2 ranks on one GPU, the Brown data, the fp16 build
#      (loss-scale sequences against DeepSpeed's scaler, fp16 vs the CPU's fp16 mode), --attention flash
#      against PyTorch and the cuBLAS attention (section 11; GPU_TEST_ONLY=flash runs it alone)
#   3a. the fp16 build (make train_gpt FP16=1) on GPT-2 124M and Brown: DeepSpeed's dynamic loss
#      scaling from 2^16, the scale of every step in the log, the loss falls
#   3b. where transformers is installed: export_model's files loaded by GPT2LMHeadModel /
#      LlamaForCausalLM.from_pretrained, their logits, gradients and AdamW steps against zeroc
#      (scripts/hf_compare.py, then test_gpt_cpu)
#   3a'. ZeRO-Infinity: train_gpt with the optimizer state (stage 1) and also the parameter shard
#      (stage 3) on NVMe (a directory on this machine's disk) against CPU offload: losses and checkpoints bitwise
#   3c. tests/test_sample_gpu.sh: sampling with the KV cache against the full forward (every position's
#      logits, stage 0 and ZeRO-3 on 2 ranks), --sample 1 deterministic and equal across stages, greedy
#      text against the full forward and the CPU (information), tokens/s of GPT-2 124M with and without the cache
#   4. GPT-2 124M on the Brown data: tokens/s, MFU and device memory (ZeRO 0, and with --attention flash;
#      ZeRO 3 and offload for overheads; --recompute and --cpu-checkpointing: memory against speed)
#   5. tests/test_cuda_kernels.sh: every dev/cuda kernel against its CPU reference, timed
#   6. compute-sanitizer memcheck on short training runs (gpt2 stage 0, llama stage 3); racecheck and
#      initcheck; memcheck, racecheck and initcheck of --attention flash (hd 64 and 128)
#   7. a summary table
# The full output goes to bench/gpu_check_<UTC date>_<device>.txt (and to $OUT when set, so
# the device tool brings it back).
#
# Before the session, HERE (the build machine): bash scripts/gpu_deps.sh   (fills .gpu_deps/)
# The device tool call:
#   command: bash scripts/gpu_check.sh
#   carry:   ["data", ".gpu_deps"]        (both are git-ignored: data/ from scripts/prepare_data.sh)
# Stages get time limits; when the 9 minutes run short the remaining ones are skipped and say so.
cd "$(dirname "$0")/.."
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-585}
PEAK_SPEC=989e12      # H100 SXM dense bf16, datasheet
PEAK_MEASURED=800e12  # DESIGN.md: about 800 TFLOP/s measured on an 8192^3 bf16 GEMM
dev_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
tag=$(echo "${dev_name:-nogpu}" | tr -c 'A-Za-z0-9\n' '_' | tr -s '_' | sed 's/_$//')
mkdir -p bench
LOG="bench/gpu_check_$(date -u +%Y%m%d-%H%M%S)_${tag}.txt"
TMPD=$(mktemp -d /tmp/zeroc_gpucheck.XXXXXX)
results=()

elapsed() { echo $(( $(date +%s) - START )); }

# GPU_CHECK_ONLY="build,test_gpu,...": run only the stages with these keys (a rerun of what failed);
# keys: build test_gpu nvme fp16 hf sample bench kernels sanitize compare gpu_train demo. `compare` (GPT-2 124M,
# 300 steps against PyTorch on the same GPU, bench/gpu_compare/), `gpu_train` (bench/gpu_train.sh: zeroc's
# speed against PyTorch eager and torch.compile) and `demo` (`make demo` as one command, README's first line:
# GPU_DEMO_STEPS steps, default 300) run only when named.
ONLY=${GPU_CHECK_ONLY:-build,test_gpu,nvme,fp16,hf,sample,bench,kernels,sanitize}

# stage KEY NAME LIMIT_S CMD...: runs CMD with a time limit (cut to what the budget has left)
stage() {
    local key=$1 name=$2 limit=$3; shift 3
    case ",$ONLY," in *",$key,"*) ;; *) return;; esac
    local left=$(( BUDGET - $(elapsed) ))
    if [ $left -lt 25 ]; then
        echo; echo "######## $name: SKIPPED (the 9-minute budget is spent)"
        results+=("$name|SKIPPED (time)|0"); return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo; echo "######## $name (limit ${limit}s, at $(elapsed)s)"
    local t0=$(date +%s) rc
    timeout -k 10 "$limit" bash -c '"$@"' stage "$@"; rc=$?
    local dt=$(( $(date +%s) - t0 )) st
    case $rc in 0) st=PASS;; 77) st=SKIP;; 124|137) st="TIMEOUT (${limit}s)";; *) st="FAIL (exit $rc)";; esac
    echo "######## $name: $st in ${dt}s"
    results+=("$name|$st|$dt")
}

# NCCL and cuBLAS: the toolkit's, else the ones PyTorch's wheels bring (nvidia.nccl, nvidia.cublas)
cuda_libs() {
    local cuda=${CUDA_HOME:-/usr/local/cuda} shim="$TMPD/libshim" py
    NVCC=${NVCC:-$(command -v nvcc || echo "$cuda/bin/nvcc")}
    export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    py=$(command -v python3)
    mkdir -p "$shim"
    for spec in nccl:nccl.h:libnccl.so cublas:cublasLt.h:libcublasLt.so cublas:cublas_v2.h:libcublas.so; do
        local mod=${spec%%:*} rest=${spec#*:}; local hdr=${rest%%:*} lib=${rest#*:}
        if [ -f "$cuda/include/$hdr" ] && ls "$cuda"/lib64/$lib* >/dev/null 2>&1; then continue; fi
        if [ -f "/usr/include/$hdr" ] && ls /usr/lib/x86_64-linux-gnu/$lib* >/dev/null 2>&1; then continue; fi
        local d="" pkg
        # CUDA 12 wheels: nvidia/<lib>/{include,lib}; CUDA 13 wheels put every library but NCCL in nvidia/cu13/
        for pkg in "nvidia.$mod" nvidia.cu13; do
            d=$("$py" -c "import importlib; m = importlib.import_module('$pkg'); print(list(m.__path__)[0])" 2>/dev/null)
            [ -n "$d" ] && [ -f "$d/include/$hdr" ] && break
            d=""
        done
        if [ -z "$d" ]; then echo "gpu_check: warning: $hdr / $lib not found (toolkit, nvidia.$mod or nvidia.cu13 wheel)"; continue; fi
        local real
        real=$(ls "$d"/lib/$lib.* 2>/dev/null | head -1)
        [ -n "$real" ] && ln -sf "$real" "$shim/$lib"
        export CPATH="$d/include${CPATH:+:$CPATH}"
        export LIBRARY_PATH="$shim${LIBRARY_PATH:+:$LIBRARY_PATH}"
        export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "gpu_check: $lib from $d"
    done
    export NVCC
}

build() {
    make -j"$(nproc)" $GPU_MAKE_FLAGS NVCC="$NVCC" gpu-all build/z0/train_gpt_cpu cuda-dev
}

sanitize() {
    local cs
    cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
    [ -x "$cs" ] || { echo "no compute-sanitizer"; return 77; }
    local rc=0 common="--preset tiny --batch 2 --seq 32 --steps 2 --quiet 1 --val-every 2 --val-batches 1"
    echo "-- memcheck: gpt2, stage 0, 2 steps + validation"
    "$cs" --tool memcheck --error-exitcode 3 --print-limit 20 ./build/gpu_z0_o0/train_gpt --arch gpt2 $common || rc=1
    echo "-- memcheck: llama, stage 3 (every unit gathered), 2 steps + validation"
    "$cs" --tool memcheck --error-exitcode 3 --print-limit 20 ./build/gpu_z3_o0/train_gpt --arch llama $common \
        --persistence-threshold 0 || rc=1
    # racecheck: shared-memory hazards in our kernels (one step). cuBLASLt's own kernels (nvjet, cutlass,
    # xmma) synchronize in ways racecheck does not follow (split-K counters, TMA barriers): their reports
    # are printed, not counted
    local arch z out ours
    for arch in gpt2 llama; do
        z=0; [ $arch = llama ] && z=3
        echo "-- racecheck: $arch, stage $z, 1 step"
        out=$("$cs" --tool racecheck --print-limit 50 ./build/gpu_z${z}_o0/train_gpt --arch $arch \
            --preset tiny --batch 2 --seq 32 --steps 1 --quiet 1 --comm mpi --persistence-threshold 0 2>&1)
        echo "$out" | grep -E "Race reported|RACECHECK SUMMARY" | head -8
        if echo "$out" | grep "Race reported" | grep -qvE "nvjet|cutlass|xmma|gemm|cublas"; then
            echo "   a hazard in one of our kernels"; rc=1
        else echo "   no hazard in our kernels"; fi
    done
    # the fused attention (--attention flash, cuda/flash_attention.cuh): memcheck, racecheck (its shared-memory
    # tiles) and initcheck (dqkv must be written whole: with flash nothing else writes that scratch) at head
    # sizes 64 (gpt2) and 128 (llama, GQA 2:1), T = 96 (one full and one partial 64-row tile), 1 step
    local fa="--preset tiny --layers 1 --dim 256 --ffn 512 --max-seq 128 --seq 96 --batch 2 --steps 1 --quiet 1 --attention flash"
    for arch in gpt2 llama; do
        local shape="--heads 4"; [ $arch = llama ] && shape="--heads 2 --kv-heads 1"
        echo "-- memcheck, racecheck, initcheck: --attention flash, $arch $shape"
        "$cs" --tool memcheck --error-exitcode 3 --print-limit 20 ./build/gpu_z0_o0/train_gpt --arch $arch $fa $shape || rc=1
        out=$("$cs" --tool racecheck --print-limit 50 ./build/gpu_z0_o0/train_gpt --arch $arch $fa $shape 2>&1)
        echo "$out" | grep -E "Race reported|RACECHECK SUMMARY" | head -8
        if echo "$out" | grep "Race reported" | grep -qvE "nvjet|cutlass|xmma|gemm|cublas"; then
            echo "   a hazard in one of our kernels"; rc=1
        else echo "   racecheck: no hazard in our kernels"; fi
        out=$("$cs" --tool initcheck --kernel-name-exclude kns=splitKreduce --print-limit 50 ./build/gpu_z0_o0/train_gpt \
            --arch $arch $fa $shape 2>&1)
        echo "$out" | grep "ERROR SUMMARY" | head -1
        ours=$(echo "$out" | grep -E "^=+ +at " | grep -vE "cublas|nvjet|cutlass|xmma|splitK")
        if ! echo "$out" | grep -q "ERROR SUMMARY"; then echo "$out" | tail -n 5; echo "   initcheck did not run"; rc=1
        elif [ -n "$ours" ]; then echo "$ours" | sort | uniq -c | head -6; echo "   initcheck: a read of uninitialized memory in one of our kernels"; rc=1
        else echo "   initcheck: none in our kernels"; fi
    done
    # initcheck: a read of device memory nothing wrote (accumulation included), without and with recompute.
    # cuBLASLt's split-K reduce reads memory it did not write (540k reports a step, run 3 of 2026-11-22):
    # excluded, and any other report in cuBLAS's kernels is printed, not counted
    local r
    for r in 0 1; do
        echo "-- initcheck: gpt2, stage 0, --recompute $r, accumulation 2, 1 step (cuBLASLt's splitKreduce excluded)"
        out=$("$cs" --tool initcheck --kernel-name-exclude kns=splitKreduce --print-limit 50 ./build/gpu_z0_o0/train_gpt \
            --arch gpt2 --preset tiny --batch 2 --seq 32 --accum 2 --steps 1 --quiet 1 --recompute $r 2>&1)
        echo "$out" | grep -E "^=+ +at " | sort | uniq -c | sort -rn | head -6
        echo "$out" | grep "ERROR SUMMARY" | head -1
        ours=$(echo "$out" | grep -E "^=+ +at " | grep -vE "cublas|nvjet|cutlass|xmma|splitK")
        if ! echo "$out" | grep -q "ERROR SUMMARY"; then echo "$out" | tail -n 5; echo "   initcheck did not run"; rc=1
        elif [ -n "$ours" ]; then echo "   a read of uninitialized memory in one of our kernels"; rc=1
        else echo "   none in our kernels"; fi
    done
    return $rc
}

# GPT-2 124M on the Brown data, zeroc's GPU trainer against the PyTorch reference (scripts/train_gpt.py,
# fp32, TF32 off) on this GPU: same initial weights (train_gpt_cpu --steps 0 --save), same data order,
# same flags. Writes bench/gpu_compare/{zeroc,torch}.{jsonl,log}, loss.png and summary.txt, whose last
# line is "gpu_compare: N steps, max |loss diff| X, mean Y" over the steps after the warm-up.
compare() {
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/"; return 77; }
    python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "no torch with CUDA"; return 77; }
    local D=bench/gpu_compare steps=${GPU_COMPARE_STEPS:-300} warm=20 rc=0
    mkdir -p "$D" "$TMPD/init"
    ./build/z0/train_gpt_cpu --preset gpt2-124m --batch 1 --seq 1024 --steps 0 --save "$TMPD/init" --quiet 1 > /dev/null || return 1
    local F=(--preset gpt2-124m --batch 8 --seq 1024 --steps "$steps" --lr 6e-4 --warmup $warm
             --init "$TMPD/init/ckpt_00000000/model.bin" --train data/brown/train.bin --val data/brown/val.bin
             --val-every 50 --val-batches 4)
    echo "-- zeroc: ./build/gpu_z0_o0/train_gpt ${F[*]}"
    local t0=$(date +%s)
    ./build/gpu_z0_o0/train_gpt "${F[@]}" --log "$D/zeroc.jsonl" > "$D/zeroc.log" 2>&1 || rc=1
    echo "   $(( $(date +%s) - t0 )) s, exit $rc"; sed -n '1,4p;$p' "$D/zeroc.log"
    [ $rc -eq 0 ] || { tail -n 20 "$D/zeroc.log"; return 1; }
    echo "-- PyTorch: scripts/train_gpt.py ${F[*]} --device cuda"
    t0=$(date +%s)
    PYTHONUNBUFFERED=1 python3 scripts/train_gpt.py "${F[@]}" --device cuda --log "$D/torch.jsonl" > "$D/torch.log" 2>&1 || rc=1
    echo "   $(( $(date +%s) - t0 )) s, exit $rc"; sed -n '1,4p;$p' "$D/torch.log"
    [ $rc -eq 0 ] || { tail -n 20 "$D/torch.log"; return 1; }
    python3 scripts/plot_losses.py "$D/zeroc.jsonl" "$D/torch.jsonl" --labels zeroc,PyTorch \
        --title "GPT-2 124M on Brown (B=8, T=1024): zeroc bf16 vs PyTorch fp32, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
        --out "$D/loss.png" | tail -n 3
    python3 - "$D" "$warm" <<'PYEOF' | tee "$D/summary.txt"
import json, os, subprocess, sys
d, warm = sys.argv[1], int(sys.argv[2])
def losses(p, kind="train", key="loss"):
    return {r["step"]: r[key] for r in map(json.loads, open(p)) if r.get("type") == kind}
a, b = losses(d + "/zeroc.jsonl"), losses(d + "/torch.jsonl")
va, vb = losses(d + "/zeroc.jsonl", "val", "val_loss"), losses(d + "/torch.jsonl", "val", "val_loss")
commit = os.environ.get("ZEROC_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
print("GPT-2 124M on Brown, B=8 x T=1024, lr 6e-4 cosine, warm-up %d; zeroc train_gpt (bf16, fp32 master) vs scripts/train_gpt.py (fp32, TF32 off)" % warm)
print("commit %s, %s" % (commit, gpu))
for s in sorted(set(va) & set(vb)):
    print("val step %4d: zeroc %.4f  PyTorch %.4f  diff %+.4f" % (s, va[s], vb[s], va[s] - vb[s]))
steps = sorted(s for s in set(a) & set(b) if s > warm)
d_ = [abs(a[s] - b[s]) for s in steps]
print("loss at step %d: zeroc %.4f, PyTorch %.4f" % (steps[-1], a[steps[-1]], b[steps[-1]]))
print("gpu_compare: %d steps, max |loss diff| %.4f, mean %.4f" % (len(a), max(d_), sum(d_) / len(d_)))
PYEOF
    if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then mkdir -p "$OUT/gpu_compare" && cp "$D"/* "$OUT/gpu_compare/"; fi
    return $rc
}

# zeroc's Hugging Face export in transformers itself, both architectures: a checkpoint trained 3 steps,
# exported, loaded with from_pretrained; scripts/hf_compare.py writes the debug state of the transformers
# model (logits, loss, gradients, 10 AdamW steps) and test_gpt_cpu compares zeroc with it (CPU, fp32)
hf_transformers() {
    python3 -c 'import transformers' 2>/dev/null || { echo "transformers is not installed: skipped"; return 77; }
    make -s build/z0/train_gpt_cpu build/z0/test_gpt_cpu build/export_model || return 1
    source tests/lib.sh     # make_shard, $TMP (removed when this stage's shell exits)
    PY=python3
    make_shard "$TMP/train.bin" 50000 250
    local rc=0 arch M
    for arch in gpt2 llama; do
        M="--arch $arch --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 32"
        [ $arch = llama ] && M="$M --kv-heads 2"
        echo "-- $arch"
        ./build/z0/train_gpt_cpu $M --train "$TMP/train.bin" --batch 4 --steps 3 --lr 1e-2 --quiet 1 --save "$TMP/ck_$arch" > /dev/null &&
            ./build/export_model "$TMP/ck_$arch" "$TMP/hf_$arch" &&
            python3 scripts/hf_compare.py $M --train "$TMP/train.bin" --init "$TMP/hf_$arch/model.safetensors" --batch 4 \
                --lr 1e-3 --debug-state "$TMP/dbg_$arch.bin" &&
            ./build/z0/test_gpt_cpu $M --state "$TMP/dbg_$arch.bin" --init "$TMP/hf_$arch/model.safetensors" --threads 4 || rc=1
    done
    return $rc
}

# the fp16 build on GPT-2 124M and the Brown data, 30 steps: every step's loss scale (and the steps
# an overflow skipped) printed from the JSONL log; passes when every loss is finite and the loss falls
fp16_run() {
    nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "no GPU found"; return 77; }
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/ (scripts/prepare_data.sh makes it)"; return 77; }
    local out="$TMPD/fp16.out"
    ./build/gpu_z0_o0_fp16/train_gpt --preset gpt2-124m --batch 16 --seq 1024 --steps 30 --lr 6e-4 --warmup 10 \
        --log "$TMPD/fp16.jsonl" > "$out" 2>&1
    local rc=$?
    grep -E "^step +[0-9]+/" "$out" | sed -n '1,8p;$p'
    [ $rc -eq 0 ] || { tail -n 20 "$out"; return 1; }
    python3 - "$TMPD/fp16.jsonl" <<'PYEOF'
import json, math, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
print("loss scale per step: " + " ".join("%g%s" % (r["loss_scale"], "(skipped)" if r["skipped"] else "") for r in recs))
loss = [r["loss"] for r in recs if not r["skipped"]]
fin = all(isinstance(x, float) and math.isfinite(x) for x in loss)
print("%d steps, %d skipped (overflow); loss %.4f -> %.4f" % (len(recs), sum(r["skipped"] for r in recs), loss[0], loss[-1]))
sys.exit(0 if len(recs) == 30 and fin and len(loss) >= 20 and loss[-1] < loss[0] - 0.5 else 1)
PYEOF
}

# ZeRO-Infinity on the GPU (zero/device.cuh): the master, m and v streamed from NVMe through CPU-Adam,
# and at stage 3 the bf16 parameter shard read from NVMe one unit ahead of its gather, against CPU
# offload (everything in pinned memory): every loss and every checkpoint byte identical
# `make demo` as a user types it (README's first command): it must take its GPU branch, train with falling
# losses and print a sample. Its output goes to bench/demo_gpu_<UTC date>_<device>.txt as well.
demo_gpu() {
    local out="bench/demo_gpu_$(date -u +%Y%m%d)_${tag}.txt"
    { echo "make demo: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}, ${dev_name}"
      STEPS=${GPU_DEMO_STEPS:-300} make demo 2>&1; } > "$out"
    local rc=$?
    [ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp "$out" "$OUT/"
    grep -v "^step " "$out" | tail -n 30; grep "^step " "$out" | sed -n '1p;$p'
    [ $rc -eq 0 ] || { echo "make demo exited with $rc"; return 1; }
    grep -q "^demo: GPU found" "$out" || { echo "make demo did not take its GPU branch"; return 1; }
    grep -q "^sample" "$out" || { echo "make demo printed no sample"; return 1; }
    python3 - out/demo_gpu.jsonl <<'PYEOF'
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
print(f"make demo: {len(l)} steps, train loss {l[0]:.4f} -> {l[-1]:.4f}")
sys.exit(0 if len(l) >= 10 and l[-1] < l[0] - 1.0 else 1)
PYEOF
}

nvme_gpu() {
    nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "no GPU found"; return 77; }
    source tests/lib.sh     # make_shard, $TMP on this machine's disk (removed when this stage's shell exits)
    PY=python3
    make_shard "$TMP/train.bin" 100000 500
    mkdir -p "$TMP/nvme"
    local rc=0 z M="--preset tiny --vocab 500 --batch 4 --seq 64 --accum 2 --steps 6 --quiet 1"
    for z in 1 3; do
        local nv="--offload-nvme $TMP/nvme --nvme-tile 4096"
        [ $z = 3 ] && nv="$nv --offload-param-nvme $TMP/nvme --persistence-threshold 0"
        ./build/gpu_z${z}_o1/train_gpt $M --train "$TMP/train.bin" --log "$TMP/cpu$z.jsonl" --save "$TMP/cpu$z" > "$TMP/cpu$z.out" 2>&1 &&
            ./build/gpu_z${z}_o1/train_gpt $M --train "$TMP/train.bin" --log "$TMP/nvme$z.jsonl" --save "$TMP/nvme$z" $nv --quiet 0 \
                > "$TMP/nvme$z.out" 2>&1 || { tail -n 5 "$TMP/cpu$z.out" "$TMP/nvme$z.out"; rc=1; continue; }
        grep -E "^ZeRO-Infinity|^       \(one file" "$TMP/nvme$z.out"
        python3 - "$TMP/cpu$z.jsonl" "$TMP/nvme$z.jsonl" "$z" <<'PYEOF' || rc=1
import json, sys
rec = lambda p, t: [r for r in map(json.loads, open(p)) if r.get("type") == t]
a, b = ([(r["loss"], r["grad_norm"]) for r in rec(p, "train")] for p in sys.argv[1:3])
io = rec(sys.argv[2], "nvme")[-1]
print("stage %s: %d losses, CPU offload %s, NVMe %s: %s; last step's NVMe I/O: %.1f MB read, %.1f MB written in %.1f ms"
      % (sys.argv[3], len(a), [x[0] for x in a], [x[0] for x in b], "identical" if a == b else "DIFFERENT",
         io["step_read_bytes"] / 1e6, io["step_write_bytes"] / 1e6, io["step_io_s"] * 1e3))
sys.exit(0 if a == b and len(a) == 6 else 1)
PYEOF
        local f
        for f in "$TMP/cpu$z/ckpt_00000006"/model.bin "$TMP/cpu$z/ckpt_00000006"/optim_rank_*.bin; do
            cmp "$f" "$TMP/nvme$z/ckpt_00000006/$(basename "$f")" || rc=1
        done
        [ -z "$(ls -A "$TMP/nvme")" ] || { echo "files left in $TMP/nvme"; rc=1; }
    done
    return $rc
}

# one benchmark run: NAME BINARY STEPS [flags]; appends "name|tok/s|ms|GFLOP/s per tok|loss a->b|mem" to $TMPD/bench.txt
bench_run() {
    local name=$1 bin=$2 steps=$3; shift 3
    local out="$TMPD/bench_$name.out"
    echo "-- $name: $bin --preset gpt2-124m --batch 16 --seq 1024 --steps $steps $*"
    "$bin" --preset gpt2-124m --batch 16 --seq 1024 --steps "$steps" --lr 6e-4 --warmup 10 --log "$TMPD/bench_$name.jsonl" \
        "$@" > "$out" 2>&1
    local rc=$?
    grep -E "^zeroc|ZeRO stage|^\| (model states|device in use|host|activations|scratch)|step +[0-9]+/" "$out" | sed -n '1,14p;$p'
    [ $rc -eq 0 ] || { tail -n 20 "$out"; echo "$name|FAILED (exit $rc)" >> "$TMPD/bench.txt"; return 1; }
    python3 - "$name" "$TMPD/bench_$name.jsonl" >> "$TMPD/bench.txt" <<'PYEOF'
import json, statistics, sys
name, log = sys.argv[1:3]
recs = list(map(json.loads, open(log)))
rows = [r for r in recs if r.get("type") == "train"]
steady = [r for r in rows if r["step"] > 5] or rows   # the first steps warm up cuBLAS and the allocator
tok = statistics.median(r["tokens_per_sec"] for r in steady)
ms = statistics.median(r["ms"] for r in steady)
fpt = statistics.median(r["gflops"] * 1e9 / r["tokens_per_sec"] for r in steady)
mem = max([r.get("mem_bytes", 0) for r in rows] + [r.get("device_used_bytes", 0) for r in recs if r.get("type") == "memory"])
print(f"{name}|{tok:.0f}|{ms:.1f}|{fpt / 1e9:.4f}|{rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}|{mem / 2**30:.1f}")
PYEOF
}

bench() {
    nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "no GPU found"; return 77; }
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/ (scripts/prepare_data.sh makes it)"; return 77; }
    : > "$TMPD/bench.txt"
    local rc=0
    bench_run zero0 ./build/gpu_z0_o0/train_gpt 30 || rc=1
    # the fused attention (cuda/flash_attention.cuh; default cublas until it has passed test_gpu.sh section 11)
    bench_run zero0_flash ./build/gpu_z0_o0/train_gpt 30 --attention flash || rc=1
    bench_run zero3 ./build/gpu_z3_o0/train_gpt 15 || rc=1
    bench_run zero2_offload ./build/gpu_z2_o1/train_gpt 12 || rc=1
    # memory against speed: activation checkpointing, and its checkpoints in pinned host memory
    bench_run zero0_recompute ./build/gpu_z0_o0/train_gpt 12 --recompute 1 || rc=1
    bench_run zero0_cpu_ckpt ./build/gpu_z0_o0/train_gpt 12 --recompute 1 --cpu-checkpointing 1 || rc=1
    echo
    python3 - "$TMPD/bench.txt" "$PEAK_SPEC" "$PEAK_MEASURED" <<'PYEOF'
import sys
path, spec, meas = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print("GPT-2 124M on Brown, B=16 x T=1024 (16384 tokens per step), one GPU, median over the steps after the 5th")
print(f"{'run':<15} {'tok/s':>9} {'ms/step':>8} {'FLOP/token':>12} {'TFLOP/s':>8} {'MFU(989)':>9} {'MFU(800)':>9} {'loss':>17} {'GPU GiB':>8}")
for line in open(path):
    f = line.strip().split("|")
    if len(f) < 6: print(f"{f[0]:<15} {f[1]}"); continue
    tok, ms, gfpt = float(f[1]), float(f[2]), float(f[3])
    fl = tok * gfpt * 1e9
    print(f"{f[0]:<15} {tok:>9.0f} {ms:>8.1f} {gfpt * 1e9:>12.4g} {fl / 1e12:>8.1f} {100 * fl / spec:>8.1f}% {100 * fl / meas:>8.1f}% {f[4]:>17} {f[5]:>8}")
print("FLOP/token: model_flops_per_token() of model/model.h (6N + 12LTC, PaLM/llm.c convention), as the trainer prints it.")
print(f"MFU(989): against the H100 SXM datasheet's {spec / 1e12:.0f} TFLOP/s dense bf16; MFU(800): against ~{meas / 1e12:.0f} measured (DESIGN.md).")
PYEOF
    return $rc
}

main() {
    # ZEROC_COMMIT: the device tool copies the working tree, not always the repository's newest HEAD
    echo "zeroc gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git status --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')}"
    nvidia-smi -L 2>/dev/null || echo "nvidia-smi -L: no GPU"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
    echo "cores: $(nproc), memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
    # the facts that decide whether the carried libraries can work here, before they are unpacked
    local inc=${CUDA_HOME:-/usr/local/cuda}/include
    echo "glibc $(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9]*\.[0-9]*$'); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
    echo "mpirun of the image: $(command -v mpirun || echo none)$(command -v mpirun >/dev/null && mpirun --version 2>/dev/null | head -n 1 | sed 's/^/, /')"
    echo "NCCL (toolkit header): $(grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$inc/nccl.h" 2>/dev/null | awk '{printf "%s%s", NR > 1 ? "." : "", $3}')" \
         "cuBLAS: $(grep -hE '^#define CUBLAS_VER_(MAJOR|MINOR|PATCH) ' "$inc/cublas_api.h" 2>/dev/null | awk '{printf "%s%s", NR > 1 ? "." : "", $3}')"
    echo; echo "######## environment"
    # shellcheck source=scripts/gpu_env.sh
    if source scripts/gpu_env.sh; then results+=("environment (.gpu_deps)|PASS|$(elapsed)")
    else results+=("environment (.gpu_deps)|FAIL|$(elapsed)"); fi
    cuda_libs
    "$NVCC" --version | tail -n 2
    python3 -c "import torch; print('python3', __import__('sys').version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" 2>/dev/null
    export -f build sanitize bench bench_run hf_transformers fp16_run compare nvme_gpu demo_gpu
    export TMPD PEAK_SPEC PEAK_MEASURED ZEROC_COMMIT tag dev_name
    # correctness first, then the numbers, then the diagnostics: what the budget cuts comes last
    stage build "build (sm_90)" 200 build
    stage test_gpu "test_gpu.sh (test_gpt vs PyTorch, GPU vs CPU, resume, stages, fp16, flash, fusion)" 380 bash tests/test_gpu.sh
    stage nvme "NVMe offload (ZeRO-Infinity) vs CPU offload, bitwise" 45 nvme_gpu
    stage fp16 "fp16 build: GPT-2 124M on Brown, loss scaling" 60 fp16_run
    stage hf "transformers: export in GPT2LMHeadModel/LlamaForCausalLM vs zeroc" 60 hf_transformers
    stage sample "sampling: KV cache vs full forward, --sample 1 (test_sample_gpu.sh)" 90 bash tests/test_sample_gpu.sh
    stage bench "benchmark: GPT-2 124M on Brown" 180 bench
    stage sanitize "compute-sanitizer memcheck, racecheck, initcheck" 210 sanitize
    stage kernels "dev/cuda kernels vs CPU references" 180 bash tests/test_cuda_kernels.sh
    stage compare "GPT-2 124M, zeroc vs PyTorch on this GPU (bench/gpu_compare)" 420 compare
    stage gpu_train "speed: zeroc vs PyTorch eager and torch.compile (bench/gpu_train.sh)" 420 bash bench/gpu_train.sh
    stage demo "make demo (README's first command) on the GPU" 240 demo_gpu

    echo; echo "######## summary ($(elapsed)s of ${BUDGET}s; ${dev_name:-no GPU})"
    printf '| %-62s | %-16s | %6s |\n' "stage" "result" "time"
    printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..64})" "$(printf -- '-%.0s' {1..18})" "$(printf -- '-%.0s' {1..8})"
    local r
    for r in "${results[@]}"; do
        IFS='|' read -r n s t <<< "$r"
        printf '| %-62s | %-16s | %5ss |\n' "$n" "$s" "$t"
    done
    if [ -s "$TMPD/bench.txt" ]; then echo; python3 - "$TMPD/bench.txt" <<'PYEOF'
import sys
for line in open(sys.argv[1]):
    f = line.strip().split("|")
    if len(f) >= 6: print(f"benchmark {f[0]}: {float(f[1]):.0f} tok/s, {f[2]} ms/step, loss {f[4]}, {f[5]} GiB on the GPU")
    else: print(f"benchmark {f[0]}: {f[1]}")
PYEOF
    fi
    local bad=0
    for r in "${results[@]}"; do [[ "$r" == *"|FAIL"* || "$r" == *"|TIMEOUT"* ]] && bad=1; done
    echo "full log: $LOG"
    return $bad
}

main 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp "$LOG" "$OUT/" && echo "copied to \$OUT/$(basename "$LOG")"
rm -rf "$TMPD"
exit $rc
