#!/usr/bin/env bash
# scripts/gpu_check.sh: the one command for a lent GPU machine (H100/H200). It validates and measures,
# most informative first, everything that has not run on a GPU yet, within a time budget sized to the
# device's 15 minutes: the machine's start (up to 240 s) + this command (a budget of 540 s, the call's
# timeout_s 570) leave a minute for the transfers, so ONE call is planned; a second would pay a new
# start and a new build.
#
# The device tool call (docs/gpu.md, "The next GPU session", gives it whole). Here, first:
# bash scripts/gpu_deps.sh (.gpu_deps), bash scripts/llmc_fetch.sh (.llmc), make data. Then:
#   command: ZEROC_COMMIT=<hash> bash scripts/gpu_check.sh
#   carry: ["data", ".gpu_deps", ".llmc"]        timeout_s: 570        (no kind: an H100, or an H200)
#
# First the facts a failure needs (device, driver, nvcc, the NCCL the trainer loads and every other one
# found, cuBLAS, PyTorch, compute-sanitizer), each probe under its own time limit; then the stages. A
# stage runs when the budget has at least its expected time left (else SKIPPED (budget)), under its
# limit cut to what is left, and prints
#   ######## NAME: PASS|FAIL (exit N)|TIMEOUT (N s)|SKIP|SKIPPED (budget)|SKIPPED (build failed) in N s
# The build runs once; when it fails, every stage that needs it is skipped with that reason. Every run
# inside a stage has its own limit too (test_gpu.sh's GPU_RUN_TIMEOUT, each dev/cuda program, each
# benchmark row, each sanitizer run), so that one hang costs its run, not the stage. The run ends with a
# summary table and exactly the line
#   gpu_check: N passed, N failed, N skipped          (a TIMEOUT counts as failed)
# Expected times: the H100 logs of 2026-11-22 (bench/gpu_check_2026112*: build of every variant 25-29 s,
# test_gpu.sh sections 1-8 101-137 s at about 1.1 s per tiny run, the 13 dev/cuda programs 106 s, about
# 6.5 s of start-up per GPT-2 124M run) and the runs written since, counted. The machine has 16 cores:
# test_gpu.sh's sections run in parallel groups, each group one process on the GPU (tiny models; the
# checks compare results, never times, so sharing the GPU changes nothing they check).
#
#   key           limit expected  what
#   build           150      60   make -j: every train_gpt variant, test_gpt, test_decode, the CPU trainer,
#                                 export_model, every dev/cuda program; then llm.c's train_gpt2cu starts
#                                 building in the background (bench/llmc_build.sh, for the llmc stage)
#   kernels         120      70   dev/cuda programs not run on a GPU in their present form (all but
#                                 KERNELS_VALIDATED below; a new program joins by existing)
#   test_new        200     120   test_gpu.sh 9-12, 14 and 15 (each opt-in path against the default) and 1-2
#                                 (the default against PyTorch and the CPU trainer), 7 groups in parallel
#   sanitize        120      60   compute-sanitizer memcheck, racecheck, initcheck of short runs with every
#                                 opt-in path on (gpt2 hd 64 and llama hd 128 GQA, stage 3): the new
#                                 kernels' races on real hardware
#   speed           120      70   bench/gpu_train.sh pairs: GPT-2 124M, B=16, T=1024: the default, each
#                                 opt-in path, all of them, the default again (9 runs)
#   llmc            180      25   llm.c's train_gpt2cu (f1e2ace, .llmc) on the same GPU, GPT-2 124M at B=16,
#                                 T=1024, beside zeroc's rows, the ratio zeroc / llm.c (bench/gpu_train.sh llmc)
#   nccl             90      30   test_gpu.sh 13: 2 ranks on one GPU with NCCL (2.30+; below, its refusal),
#                                 the newest NCCL found first on LD_LIBRARY_PATH
#   torch           150      70   bench/gpu_train.sh torch: PyTorch eager and torch.compile (compiling ~45 s),
#                                 with the library path PyTorch had before this script (zeroc_torch)
#   test_rest       180      60   test_gpu.sh 3-8 (the default path, refactored since it ran), 5 groups in parallel
#   kernels_rest     90      40   the dev/cuda programs in KERNELS_VALIDATED
#   nvme             60      45   ZeRO-Infinity on the GPU against CPU offload, bitwise (never run on a GPU)
#   dpu              60      35   ZeRO-Offload's delayed parameter update (never run on a GPU): with the delay
#                                 never reached, bitwise offload without it; resume bitwise with it; within
#                                 1e-3 of the CPU trainer's DPU from the same seed; Twin-Flow
#                                 at stage 3 (never run on a GPU): ratio 0.5 within bf16 rounding of 1,
#                                 resumed bitwise, and from ratio 1's checkpoint
#   offload_speed   150      80   bench/gpu_train.sh offload: GPT-2 124M at stage 2 without offload, with it,
#                                 with it and DPU; at stage 3 without offload and Twin-Flow at ratios 1, 0.5,
#                                 0.25 (7 runs); each against no offload at its stage (the target: DPU >= 0.8x)
#   tensorboard      30       5   TensorBoard's own reader on the GPU trainer's event files, every scalar
#                                 against its JSONL log (scripts/tensorboard_check.py)
#   hf_export        60      20   transformers loads an exported folder whole (AutoTokenizer and
#                                 AutoModelForCausalLM) and continues prompts greedily as zeroc does
#                                 (scripts/hf_export_check.py)
# Only when named in GPU_CHECK_ONLY: sanitize_default (the sanitizers on the default path), sample
# (tests/test_sample_gpu.sh), fp16 (GPT-2 124M on the fp16 build), hf (the export against transformers'
# numbers), bench_stages (bench/gpu_train.sh stages: --breakdown, stage 3, offload, llama, recompute),
# compare (GPT-2 124M against PyTorch for 300 steps, bench/gpu_compare/), demo (make demo as one command).
#
# Through torch the expected times add up to about 520 s with the facts: the default budget reaches
# them; test_rest and what follows run when the stages before took less than expected.
# Settings: GPU_CHECK_ONLY=key,key (those stages, in the order above); GPU_CHECK_BUDGET (s, default 540);
# GPU_CHECK_LIMIT_<key>=S, GPU_CHECK_EXPECT_<key>=S (one stage's limit, expected time);
# GPU_CHECK_PROBE_TIMEOUT (s, each probe of the facts, default 20); each run's limit inside a stage:
# GPU_CHECK_KERNEL_TIMEOUT (a dev/cuda program, 60), GPU_CHECK_CS_TIMEOUT (a sanitizer run, 100),
# GPU_CHECK_RUN_TIMEOUT (a hook's run, 120), GPU_TRAIN_RUN_TIMEOUT / GPU_TRAIN_TORCH_TIMEOUT (a benchmark
# row, 60; torch.compile's, 150), GPU_RUN_TIMEOUT (test_gpu.sh's, 60); ZEROC_COMMIT=<hash> (the device copies
# the working tree, whose .git may be older); GPU_CHECK_TEST_NEW / GPU_CHECK_TEST_REST (test_gpu.sh's
# groups: space-separated, each a comma list of section keys).
# What comes back (the device tool returns at most 8 files from $OUT, 2 folders deep), each written as
# it runs, so that a call cut short still brings back what ran; in bench/ too without $OUT:
#   gpu_check_<UTC date>_<device>.txt          the whole log
#   gpu_check_<UTC date>_<device>.groups.txt   every test_gpu.sh group's lines, "[stage group] " first
#   gpu_check_<UTC date>_<device>.llmc.txt     llm.c's build
#   gpu_train_<UTC date>_<device>.txt          bench/gpu_train.sh's record
#   gpu_compare.tar.gz, demo_gpu_*.txt         the compare and demo stages, when named
cd "$(dirname "$0")/.." || exit 1
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET:-540}
PROBE_T=${GPU_CHECK_PROBE_TIMEOUT:-20}
ORDER="build kernels test_new sanitize speed llmc nccl torch test_rest kernels_rest nvme dpu offload_speed tensorboard hf_export"
OPTIONAL="sanitize_default sample fp16 hf bench_stages compare demo"
# what runs without zeroc's build: a failed build skips every other stage
NO_BUILD_NEEDED="build llmc torch"
ONLY=${GPU_CHECK_ONLY:-$(echo $ORDER | tr ' ' ',')}
for k in ${ONLY//,/ }; do
    [[ " $ORDER $OPTIONAL " == *" $k "* ]] || { echo "error: GPU_CHECK_ONLY: unknown stage '$k' ($ORDER; $OPTIONAL)" >&2; exit 2; }
done
# passed on the H100 on 2026-11-22 (run 3) and unchanged since but for comments and a CPU reference moved
# to dev/cuda/attention_ref.h (git diff af131e8 -- dev/cuda cuda); every other dev/cuda program is pending
KERNELS_VALIDATED="attention attention_decode encoder gelu residual rope swiglu"
# the pending programs most informative first; programs not named here follow in name order
KERNELS_FIRST="flash_attention adamw global_norm layernorm rmsnorm classifier matmul"
# test_gpu.sh's sections in parallel groups (each group one process, its sections in order)
TEST_NEW=${GPU_CHECK_TEST_NEW:-"flash lean loss fusion bgrad zeropp test_gpt,cpu"}
TEST_REST=${GPU_CHECK_TEST_REST:-"stages recompute fp16 ranks resume,brown"}
# every opt-in path of the step at once (config/train_config.h)
. scripts/gpu_paths.sh   # NEW_PATHS
dev_name=$(timeout -k 2 "$PROBE_T" nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
tag=$(echo "${dev_name:-nogpu}" | tr -c 'A-Za-z0-9\n' '_' | tr -s '_' | sed 's/_$//')
mkdir -p bench
LOG="bench/gpu_check_$(date -u +%Y%m%d-%H%M%S)_${tag}.txt"
GROUPS_LOG="${LOG%.txt}.groups.txt"
LLMC_LOG="${LOG%.txt}.llmc.txt"
TMPD=$(mktemp -d /tmp/zeroc_gpucheck.XXXXXX)
LLMC_DIR="$TMPD/llmc"
results=()
BUILD_FAILED=""

elapsed() { echo $(( $(date +%s) - START )); }
# one run inside a stage, under its own limit (GPU_CHECK_RUN_TIMEOUT, s); torch_t: a PyTorch run, also with the
# library path PyTorch had before this script (scripts/gpu_env.sh's zeroc_torch)
RUN_T=${GPU_CHECK_RUN_TIMEOUT:-120}
run_t() { timeout -k 5 "$RUN_T" "$@"; }
torch_t() { zeroc_torch timeout -k 5 "$RUN_T" "$@"; }
# a probe of the facts, under its limit
probe() { timeout -k 2 "$PROBE_T" "$@"; }
# a file written as it runs: in bench/ and, when the device tool's $OUT is set, there too
out_copy() { echo "${OUT:+$OUT/$(basename "$1")}"; }

# stage KEY NAME LIMIT EXPECTED CMD...: CMD under its time limit (GPU_CHECK_LIMIT_KEY overrides it; cut to
# what the budget has left), when KEY is selected, the build did not fail (or KEY needs none) and the
# budget has its expected time (GPU_CHECK_EXPECT_KEY) left. Exit 0: PASS, 77: SKIP, 124/137: TIMEOUT, else FAIL.
stage() {
    local key=$1 name=$2 limit=$3 expect=$4; shift 4
    case ",$ONLY," in *",$key,"*) ;; *) return;; esac
    local lvar="GPU_CHECK_LIMIT_$key" evar="GPU_CHECK_EXPECT_$key" left cut=""
    limit=${!lvar:-$limit}
    expect=${!evar:-$expect}
    if [ -n "$BUILD_FAILED" ] && [[ " $NO_BUILD_NEEDED " != *" $key "* ]]; then
        echo; echo "######## $key: SKIPPED (the build failed: $BUILD_FAILED)"
        results+=("$key|$name|SKIPPED (build failed)|0"); return
    fi
    left=$(( BUDGET - $(elapsed) ))
    if [ "$left" -lt "$expect" ]; then
        echo; echo "######## $key: SKIPPED (budget: $(( left > 0 ? left : 0 ))s of ${BUDGET}s left, the stage is expected to take ${expect}s)"
        results+=("$key|$name|SKIPPED (budget)|0"); return
    fi
    [ "$limit" -gt "$left" ] && { cut=", cut from ${limit}s"; limit=$left; }
    echo; echo "######## $key: $name (limit ${limit}s$cut, expected ~${expect}s, at $(elapsed)s)"
    local t0 rc dt st sid="$TMPD/session.$key"
    t0=$(date +%s)
    # in a session of its own, so that what a stage stopped at its limit leaves running (a run inside
    # test_gpu.sh's own timeout, an mpirun) is ended before the next stage measures anything
    setsid -w bash -c 'echo $$ > "$1"; shift; exec timeout -k 10 "$@"' stage-session "$sid" "$limit" bash -c '"$@"' stage "$@"
    rc=$?
    [ -s "$sid" ] && pkill -KILL -s "$(cat "$sid")" 2>/dev/null
    dt=$(( $(date +%s) - t0 ))
    case $rc in 0) st=PASS;; 77) st=SKIP;; 124|137) st="TIMEOUT (${limit}s)";; *) st="FAIL (exit $rc)";; esac
    echo "######## $key: $st in ${dt}s"
    results+=("$key|$name|$st|$dt")
    [ "$key" = build ] && [ $rc -ne 0 ] && [ $rc -ne 77 ] && BUILD_FAILED="$st"
}

# ----------------------------------------------------------------------------
# the facts

# where the dynamic loader finds SONAME for a program started now (LD_LIBRARY_PATH, the cache), and for
# libnccl its version (ncclGetVersion), in a process of its own: "PATH VERSION"
lib_probe() {
    probe "$PY" - "$1" 2>/dev/null <<'PYEOF'
import ctypes, sys
try: lib = ctypes.CDLL(sys.argv[1])
except OSError as e: print(f"not found ({e})".replace("\n", " ")); sys.exit()
path = next((l.split()[-1] for l in open("/proc/self/maps") if "/" in l and sys.argv[1].split("/")[-1].split(".so")[0] + ".so" in l), "?")
v = ctypes.c_int(0)
if "nccl" in sys.argv[1] and lib.ncclGetVersion(ctypes.byref(v)) == 0:
    c = v.value
    print(path, "%d.%d.%d" % ((c // 10000, c // 100 % 100, c % 100) if c >= 10000 else (c // 1000, c // 100 % 10, c % 100)))
else:
    print(path)
PYEOF
}

# every libnccl.so.2 on this machine that a run could load: the one the loader finds, the CUDA toolkit's,
# the system's, the PyTorch wheel's (nvidia-nccl-cu13: nvidia/nccl/lib); "PATH VERSION" each, newest first
nccl_candidates() {
    {
        lib_probe libnccl.so.2
        local d f
        for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/lib/x86_64-linux-gnu \
                 "$(probe "$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"; do
            f="$d/libnccl.so.2"
            [ -e "$f" ] && lib_probe "$(readlink -f "$f")"
        done
    } | awk 'NF == 2 && !seen[$1]++' | sort -k2,2Vr
}

facts() {
    # ZEROC_COMMIT: the device tool copies the working tree, not always the repository's newest HEAD
    echo "zeroc gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git status --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')}"
    echo "budget ${BUDGET}s, stages: ${ONLY//,/ }"
    probe nvidia-smi -L 2>/dev/null || echo "nvidia-smi -L: no GPU, or no answer in ${PROBE_T}s"
    probe nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_mode --format=csv 2>/dev/null
    echo "cores: $(nproc), memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}'); glibc $(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9]*\.[0-9]*$'); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
}

# after the environment: the compilers and libraries a run will use
facts_libs() {
    local inc=${CUDA_HOME:-/usr/local/cuda}/include
    echo "nvcc: $(probe "$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' || echo none)"
    echo "cuBLAS: header $(grep -hE '^#define CUBLAS_VER_(MAJOR|MINOR|PATCH) ' "$inc/cublas_api.h" 2>/dev/null | awk '{printf "%s%s", (NR > 1 ? "." : ""), $3}'), loaded $(lib_probe libcublasLt.so.13)"
    local h; h=$(ls "$inc/nccl.h" /usr/include/nccl.h 2>/dev/null | head -n 1)
    echo "NCCL: header ${h:-none} $(grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' "${h:-/dev/null}" | awk '{printf "%s%s", (NR > 1 ? "." : ""), $3}');" \
         "a run loads $(lib_probe libnccl.so.2)"
    nccl_candidates | sed 's/^/  NCCL found: /'
    # as the torch stage runs PyTorch: with the library path it had before this script (zeroc_torch)
    zeroc_torch timeout -k 2 "$PROBE_T" "$PY" - <<'PYEOF' 2>&1 || echo "the PyTorch probe: no answer in ${PROBE_T}s, or it failed"
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-"
    print("torch", torch.__version__, "cuda", torch.version.cuda, "| the NCCL torch uses:", nccl)
except Exception as e:
    print("torch: not usable here (%s)" % e)
import importlib.metadata as md
have = {(d.metadata["Name"] or "").lower(): d.version for d in md.distributions()}
print("wheels:", ", ".join("%s %s" % (p, have[p]) for p in ("nvidia-nccl-cu13", "nvidia-cublas", "transformers", "tensorboard") if p in have))
PYEOF
    if cs_find; then echo "compute-sanitizer: $CS, $(probe "$CS" --version 2>/dev/null | grep -o 'Version [0-9.]*' | head -n 1)"
    else echo "compute-sanitizer: none"; fi
    echo "mpirun: $(command -v mpirun || echo none) $(probe mpirun --version 2>/dev/null | head -n 1)"
}

# NCCL and cuBLAS: the toolkit's, else the ones PyTorch's wheels bring (nvidia.nccl, nvidia.cu13)
cuda_libs() {
    local cuda=${CUDA_HOME:-/usr/local/cuda} shim="$TMPD/libshim"
    NVCC=${NVCC:-$(command -v nvcc || echo "$cuda/bin/nvcc")}
    export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    mkdir -p "$shim"
    for spec in nccl:nccl.h:libnccl.so cublas:cublasLt.h:libcublasLt.so cublas:cublas_v2.h:libcublas.so; do
        local mod=${spec%%:*} rest=${spec#*:}; local hdr=${rest%%:*} lib=${rest#*:}
        if [ -f "$cuda/include/$hdr" ] && ls "$cuda"/lib64/$lib* >/dev/null 2>&1; then continue; fi
        if [ -f "/usr/include/$hdr" ] && ls /usr/lib/x86_64-linux-gnu/$lib* >/dev/null 2>&1; then continue; fi
        local d="" pkg
        # CUDA 12 wheels: nvidia/<lib>/{include,lib}; CUDA 13 wheels put every library but NCCL in nvidia/cu13/
        for pkg in "nvidia.$mod" nvidia.cu13; do
            d=$(probe "$PY" -c "import importlib; m = importlib.import_module('$pkg'); print(list(m.__path__)[0])" 2>/dev/null)
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

# ----------------------------------------------------------------------------
# the stages

build() {
    make -j"$(nproc)" $GPU_MAKE_FLAGS NVCC="$NVCC" gpu-all build/z0/train_gpt_cpu build/export_model cuda-dev || return 1
    echo "the trainer loads: $(ldd build/gpu_z0_o0/train_gpt 2>/dev/null | grep -E 'libnccl|libcublasLt' | awk '{print $1 " -> " $3}' | tr '\n' ' ')"
}

# the dev/cuda programs: pending (every one not in KERNELS_VALIDATED, KERNELS_FIRST first) or validated
kernel_list() {
    local all n first=" $KERNELS_FIRST " valid=" $KERNELS_VALIDATED "
    all=$(for n in dev/cuda/*.cu; do [ -e "$n" ] && basename "$n" .cu; done)
    if [ "$1" = validated ]; then
        for n in $all; do [[ $valid == *" $n "* ]] && echo "$n"; done
        return
    fi
    for n in $KERNELS_FIRST; do echo "$all" | grep -qx "$n" && echo "$n"; done
    for n in $all; do [[ $valid == *" $n "* || $first == *" $n "* ]] || echo "$n"; done
}
kernels() {
    local list
    list=$(kernel_list "$1" | tr '\n' ' ')
    echo "dev/cuda programs ($1): $list"
    CUDA_KERNELS="$list" CUDA_KERNELS_FULL=$([ "$1" = pending ] && echo 1 || echo 0) \
        CUDA_KERNEL_TIMEOUT=${GPU_CHECK_KERNEL_TIMEOUT:-60} bash tests/test_cuda_kernels.sh
}

# test_sections STAGE GROUP...: tests/test_gpu.sh once per group (GPU_TEST_ONLY=GROUP), every group at
# once on the one GPU, after one make of what test_gpu.sh builds (a no-op after the build stage; when it
# fails, no group starts: one build, not one per group). Each group's lines go, as they are written, to
# GROUPS_LOG (and $OUT) with "[STAGE GROUP] " first; each group's output is printed whole here, in the
# order given (also when the stage's limit stops them: what they printed so far). FAIL when a group
# failed, SKIP when every group skipped.
test_sections() {
    local stage=$1; shift
    local d i rc fail=0 skip=0 pids=() groups=("$@")
    make -s -j"$(nproc)" gpu-all build/z0/train_gpt_cpu $GPU_MAKE_FLAGS NVCC="$NVCC" ||
        { echo "test_gpu.sh's build failed: no group started"; return 1; }
    d=$(mktemp -d "$TMPD/tg.XXXXXX")
    show() {   # the groups' logs, those not printed yet
        for i in "${!groups[@]}"; do
            [ -e "$d/$i.shown" ] && continue
            echo "---- test_gpu.sh GPU_TEST_ONLY=${groups[$i]}: ${1:-stopped by the limit of the stage}"
            cat "$d/$i.log" 2>/dev/null
            touch "$d/$i.shown"
        done
    }
    trap 'show; kill "${pids[@]}" 2>/dev/null; exit 124' TERM
    for i in "${!groups[@]}"; do
        { GPU_TEST_ONLY=${groups[$i]} bash tests/test_gpu.sh 2>&1; echo $? > "$d/$i.rc"; } |
            tee "$d/$i.log" | sed -u "s/^/[$stage ${groups[$i]}] /" | tee -a "$GROUPS_LOG" $(out_copy "$GROUPS_LOG") > /dev/null &
        pids+=($!)
    done
    for i in "${!groups[@]}"; do
        wait "${pids[$i]}"
        rc=$(cat "$d/$i.rc" 2>/dev/null || echo 1)
        echo "---- test_gpu.sh GPU_TEST_ONLY=${groups[$i]}: exit $rc"
        cat "$d/$i.log"; touch "$d/$i.shown"
        case $rc in 0) ;; 77) skip=$((skip + 1));; *) fail=$((fail + 1));; esac
    done
    echo "test_gpu.sh groups: $((${#groups[@]} - fail - skip)) passed, $fail failed, $skip skipped"
    [ $fail -gt 0 ] && return 1
    [ $skip -eq ${#groups[@]} ] && return 77
    return 0
}

# test_gpu.sh 13 with the newest NCCL found first on the library path (the soname is libnccl.so.2 for
# every 2.x: a newer NCCL than the one built against runs the same binary)
nccl_stage() {
    local cands trainer tver="" newest
    cands=$(nccl_candidates)
    echo "NCCL found (newest first):"; echo "$cands" | sed 's/^/  /'
    trainer=$(ldd build/gpu_z0_o0/train_gpt 2>/dev/null | awk '/libnccl/ {print $3}')
    [ -n "$trainer" ] && tver=$(lib_probe "$(readlink -f "$trainer")" | awk 'NF == 2 {print $2}')
    echo "the trainer loads ${trainer:-no libnccl, says ldd} (NCCL ${tver:-?})"
    newest=$(echo "$cands" | head -n 1)
    if [ -n "$newest" ] && [ "${newest##* }" != "$tver" ] && [ "$(printf '%s\n%s\n' "$tver" "${newest##* }" | sort -V | tail -n 1)" = "${newest##* }" ]; then
        echo "for this stage: NCCL ${newest##* } from ${newest%% *}, first on LD_LIBRARY_PATH"
        LD_LIBRARY_PATH="$(dirname "${newest%% *}"):$LD_LIBRARY_PATH"
        export LD_LIBRARY_PATH
    fi
    test_sections nccl nccl
}

# compute-sanitizer on short runs; racecheck and initcheck fail only on a report in our kernels (cuBLASLt's
# own kernels synchronize in ways racecheck does not follow, and its split-K reduce reads memory it did not
# write: 540k reports a step in run 3 of 2026-11-22; those are printed, not counted)
CS=""
CS_T=${GPU_CHECK_CS_TIMEOUT:-100}   # each sanitizer run's limit (s)
cs_find() { CS=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"); [ -x "$CS" ]; }
cs_memcheck() {   # WHAT BINARY ARGS...
    local what=$1; shift
    echo "-- memcheck: $what"
    timeout -k 5 "$CS_T" "$CS" --tool memcheck --error-exitcode 3 --print-limit 20 "$@" > "$TMPD/cs.out" 2>&1
    local rc=$?
    grep -E "ERROR SUMMARY|error" "$TMPD/cs.out" | head -n 8
    [ $rc -eq 0 ] || { tail -n 5 "$TMPD/cs.out"; echo "   memcheck: exit $rc (124: past its ${CS_T}s)"; return 1; }
}
cs_racecheck() {
    local what=$1; shift
    echo "-- racecheck: $what"
    timeout -k 5 "$CS_T" "$CS" --tool racecheck --print-limit 50 "$@" > "$TMPD/cs.out" 2>&1 || echo "   (exit $?; 124: past its ${CS_T}s)"
    grep -E "Race reported|RACECHECK SUMMARY" "$TMPD/cs.out" | head -n 8
    grep -q "RACECHECK SUMMARY" "$TMPD/cs.out" || { tail -n 5 "$TMPD/cs.out"; echo "   racecheck did not run"; return 1; }
    if grep "Race reported" "$TMPD/cs.out" | grep -qvE "nvjet|cutlass|xmma|gemm|cublas"; then
        echo "   racecheck: a hazard in one of our kernels"; return 1
    fi
    echo "   racecheck: no hazard in our kernels"
}
cs_initcheck() {
    local what=$1 ours; shift
    echo "-- initcheck: $what (cuBLASLt's splitKreduce excluded)"
    timeout -k 5 "$CS_T" "$CS" --tool initcheck --kernel-name-exclude kns=splitKreduce --print-limit 50 "$@" > "$TMPD/cs.out" 2>&1 ||
        echo "   (exit $?; 124: past its ${CS_T}s)"
    grep "ERROR SUMMARY" "$TMPD/cs.out" | head -n 1
    ours=$(grep -E "^=+ +at " "$TMPD/cs.out" | grep -vE "cublas|nvjet|cutlass|xmma|splitK")
    if ! grep -q "ERROR SUMMARY" "$TMPD/cs.out"; then tail -n 5 "$TMPD/cs.out"; echo "   initcheck did not run"; return 1; fi
    if [ -n "$ours" ]; then echo "$ours" | sort | uniq -c | head -n 6; echo "   initcheck: a read of uninitialized memory in one of our kernels"; return 1; fi
    echo "   initcheck: none in our kernels"
}

# the opt-in paths' kernels: flash attention (hd 64 and 128, T = 96: a full and a partial 64-row tile), the
# lean norm and AdamW, the fused residual norms, the loss mean (validation too), the plan cache; one step
# (memcheck: and a validation), gpt2 at stage 0 and llama (GQA 2:1) at stage 3 with every unit gathered
sanitize_new() {
    cs_find || { echo "no compute-sanitizer"; return 77; }
    local rc=0 fa="--preset tiny --layers 2 --dim 256 --ffn 512 --max-seq 128 --seq 96 --batch 2 --steps 1 --quiet 1 $NEW_PATHS"
    local g2="./build/gpu_z0_o0/train_gpt --arch gpt2 --heads 4 $fa"
    local l3="./build/gpu_z3_o0/train_gpt --arch llama --heads 2 --kv-heads 1 --persistence-threshold 0 $fa"
    cs_memcheck "gpt2 hd 64, stage 0, every opt-in path, 1 step + validation" $g2 --val-every 1 --val-batches 1 || rc=1
    cs_memcheck "llama hd 128 GQA, stage 3, every opt-in path, 1 step + validation" $l3 --val-every 1 --val-batches 1 || rc=1
    cs_racecheck "gpt2 hd 64, stage 0, every opt-in path, 1 step" $g2 || rc=1
    cs_racecheck "llama hd 128 GQA, stage 3, every opt-in path, 1 step" $l3 || rc=1
    cs_initcheck "gpt2 hd 64, stage 0, every opt-in path, --recompute 1, accumulation 2" $g2 --recompute 1 --accum 2 || rc=1
    cs_initcheck "llama hd 128 GQA, stage 3, every opt-in path, 1 step" $l3 || rc=1
    return $rc
}

# the default path (as run 3 of 2026-11-22 ran it): memcheck gpt2 stage 0 and llama stage 3, racecheck,
# initcheck without and with recompute
sanitize_default() {
    cs_find || { echo "no compute-sanitizer"; return 77; }
    local rc=0 common="--preset tiny --batch 2 --seq 32 --steps 2 --quiet 1 --val-every 2 --val-batches 1" r
    cs_memcheck "gpt2, stage 0, 2 steps + validation" ./build/gpu_z0_o0/train_gpt --arch gpt2 $common || rc=1
    cs_memcheck "llama, stage 3 (every unit gathered), 2 steps + validation" ./build/gpu_z3_o0/train_gpt --arch llama $common \
        --persistence-threshold 0 || rc=1
    cs_racecheck "gpt2, stage 0, 1 step" ./build/gpu_z0_o0/train_gpt --arch gpt2 --preset tiny --batch 2 --seq 32 --steps 1 --quiet 1 || rc=1
    cs_racecheck "llama, stage 3, 1 step" ./build/gpu_z3_o0/train_gpt --arch llama --preset tiny --batch 2 --seq 32 --steps 1 --quiet 1 \
        --persistence-threshold 0 || rc=1
    for r in 0 1; do
        cs_initcheck "gpt2, stage 0, --recompute $r, accumulation 2, 1 step" ./build/gpu_z0_o0/train_gpt --arch gpt2 --preset tiny \
            --batch 2 --seq 32 --accum 2 --steps 1 --quiet 1 --recompute $r || rc=1
    done
    return $rc
}

# TensorBoard's own reader (EventAccumulator) on the event files of a short GPU run: every scalar must be
# the JSONL log's value (scripts/tensorboard_check.py; make test decodes the same files without tensorboard).
tensorboard_hook() {
    torch_t "$PY" -c "import tensorboard" 2>/dev/null || { echo "no tensorboard package in $PY"; return 77; }
    local d="$TMPD/tb"
    run_t ./build/gpu_z0_o0/train_gpt --preset tiny --batch 4 --seq 64 --steps 6 --val-every 3 --breakdown 1 --quiet 1 \
        --tensorboard "$d" --job-name check --log "$d.jsonl" || { echo "the run with --tensorboard $d failed"; return 1; }
    torch_t "$PY" scripts/tensorboard_check.py "$d/check" --log "$d.jsonl"
}

# transformers loads an exported folder as a user would (AutoTokenizer and AutoModelForCausalLM from the one
# directory) and continues two prompts greedily; zeroc's fp32 trainer continues them from the same
# model.safetensors, and the continuations must agree byte for byte (scripts/hf_export_check.py: a near tie
# that rounding decides is reported, not counted). The model: the tiny preset trained 30 steps on Brown.
hf_export_hook() {
    torch_t "$PY" -c "import torch, transformers" 2>/dev/null || { echo "no torch and transformers in $PY"; return 77; }
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/"; return 77; }
    local d="$TMPD/hfx" i=0 args=() p
    run_t ./build/z0/train_gpt_cpu --preset tiny --batch 8 --seq 64 --steps 30 --lr 3e-3 --quiet 1 --save "$d/ck" > /dev/null &&
        run_t ./build/export_model "$d/ck/$(cat "$d/ck/latest")" "$d/out" > /dev/null || { echo "the run or the export failed"; return 1; }
    ls "$d/out"
    for p in "The jury said" "It was a"; do
        i=$((i + 1))
        run_t ./build/z0/train_gpt_cpu --sample 1 --init "$d/out/model.safetensors" --temperature 0 --sample-len 24 \
            --prompt "$p" --quiet 1 > "$d/z$i.txt" || { echo "zeroc's sample of '$p' failed"; return 1; }
        args+=(--prompt "$p" "$d/z$i.txt")
    done
    torch_t "$PY" scripts/hf_export_check.py "$d/out" --sample-len 24 "${args[@]}"
}

# GPT-2 124M on the Brown data, zeroc's GPU trainer against the PyTorch reference (scripts/train_gpt.py,
# fp32, TF32 off) on this GPU: same initial weights (train_gpt_cpu --steps 0 --save), same data order,
# same flags. Writes bench/gpu_compare/{zeroc,torch}.{jsonl,log}, loss.png and summary.txt, whose last
# line is "gpu_compare: N steps, max |loss diff| X, mean Y" over the steps after the warm-up.
compare() {
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/"; return 77; }
    torch_t "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "no torch with CUDA"; return 77; }
    local D=bench/gpu_compare steps=${GPU_COMPARE_STEPS:-300} warm=20 rc=0
    mkdir -p "$D" "$TMPD/init"
    ./build/z0/train_gpt_cpu --preset gpt2-124m --batch 1 --seq 1024 --steps 0 --save "$TMPD/init" --quiet 1 > /dev/null || return 1
    local F=(--preset gpt2-124m --batch 8 --seq 1024 --steps "$steps" --lr 6e-4 --warmup $warm
             --init "$TMPD/init/ckpt_00000000/model.bin" --train data/brown/train.bin --val data/brown/val.bin
             --val-every 50 --val-batches 4)
    echo "-- zeroc: ./build/gpu_z0_o0/train_gpt ${F[*]}"
    local t0; t0=$(date +%s)
    RUN_T=400 run_t ./build/gpu_z0_o0/train_gpt "${F[@]}" --log "$D/zeroc.jsonl" > "$D/zeroc.log" 2>&1 || rc=1
    echo "   $(( $(date +%s) - t0 )) s, exit $rc"; sed -n '1,4p;$p' "$D/zeroc.log"
    [ $rc -eq 0 ] || { tail -n 20 "$D/zeroc.log"; return 1; }
    echo "-- PyTorch: scripts/train_gpt.py ${F[*]} --device cuda"
    t0=$(date +%s)
    RUN_T=400 PYTHONUNBUFFERED=1 torch_t "$PY" scripts/train_gpt.py "${F[@]}" --device cuda --log "$D/torch.jsonl" > "$D/torch.log" 2>&1 || rc=1
    echo "   $(( $(date +%s) - t0 )) s, exit $rc"; sed -n '1,4p;$p' "$D/torch.log"
    [ $rc -eq 0 ] || { tail -n 20 "$D/torch.log"; return 1; }
    torch_t "$PY" scripts/plot_losses.py "$D/zeroc.jsonl" "$D/torch.jsonl" --labels zeroc,PyTorch \
        --title "GPT-2 124M on Brown (B=8, T=1024): zeroc bf16 vs PyTorch fp32, $dev_name" --out "$D/loss.png" | tail -n 3
    "$PY" - "$D" "$warm" <<'PYEOF' | tee "$D/summary.txt"
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
    # one file back from $OUT (the device tool returns at most 8)
    if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then tar -czf "$OUT/gpu_compare.tar.gz" -C bench gpu_compare; fi
    return $rc
}

# zeroc's Hugging Face export in transformers itself, both architectures: a checkpoint trained 3 steps,
# exported, loaded with from_pretrained; scripts/hf_compare.py writes the debug state of the transformers
# model (logits, loss, gradients, 10 AdamW steps) and test_gpt_cpu compares zeroc with it (CPU, fp32)
hf_transformers() {
    "$PY" -c 'import transformers' 2>/dev/null || { echo "transformers is not installed: skipped"; return 77; }
    make -s build/z0/train_gpt_cpu build/z0/test_gpt_cpu build/export_model $GPU_MAKE_FLAGS || return 1
    source tests/lib.sh     # make_shard, $TMP (removed when this stage's shell exits)
    PY=$GPU_CHECK_PY
    make_shard "$TMP/train.bin" 50000 250
    local rc=0 arch M
    for arch in gpt2 llama; do
        M="--arch $arch --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 32"
        [ $arch = llama ] && M="$M --kv-heads 2"
        echo "-- $arch"
        run_t ./build/z0/train_gpt_cpu $M --train "$TMP/train.bin" --batch 4 --steps 3 --lr 1e-2 --quiet 1 --save "$TMP/ck_$arch" > /dev/null &&
            ./build/export_model "$TMP/ck_$arch" "$TMP/hf_$arch" &&
            torch_t "$PY" scripts/hf_compare.py $M --train "$TMP/train.bin" --init "$TMP/hf_$arch/model.safetensors" --batch 4 \
                --lr 1e-3 --debug-state "$TMP/dbg_$arch.bin" &&
            run_t ./build/z0/test_gpt_cpu $M --state "$TMP/dbg_$arch.bin" --init "$TMP/hf_$arch/model.safetensors" --threads 4 || rc=1
    done
    return $rc
}

# the fp16 build on GPT-2 124M and the Brown data, 30 steps: every step's loss scale (and the steps
# an overflow skipped) printed from the JSONL log; passes when every loss is finite and the loss falls
fp16_run() {
    [ -f data/brown/train.bin ] || { echo "no data/brown/train.bin: carry data/ (scripts/prepare_data.sh makes it)"; return 77; }
    local out="$TMPD/fp16.out"
    run_t ./build/gpu_z0_o0_fp16/train_gpt --preset gpt2-124m --batch 16 --seq 1024 --steps 30 --lr 6e-4 --warmup 10 \
        --log "$TMPD/fp16.jsonl" > "$out" 2>&1
    local rc=$?
    grep -E "^step +[0-9]+/" "$out" | sed -n '1,8p;$p'
    [ $rc -eq 0 ] || { tail -n 20 "$out"; return 1; }
    "$PY" - "$TMPD/fp16.jsonl" <<'PYEOF'
import json, math, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
print("loss scale per step: " + " ".join("%g%s" % (r["loss_scale"], "(skipped)" if r["skipped"] else "") for r in recs))
loss = [r["loss"] for r in recs if not r["skipped"]]
fin = all(isinstance(x, float) and math.isfinite(x) for x in loss)
print("%d steps, %d skipped (overflow); loss %.4f -> %.4f" % (len(recs), sum(r["skipped"] for r in recs), loss[0], loss[-1]))
sys.exit(0 if len(recs) == 30 and fin and len(loss) >= 20 and loss[-1] < loss[0] - 0.5 else 1)
PYEOF
}

# `make demo` as a user types it (README's first command): it must take its GPU branch, train with falling
# losses and print a sample. Its output goes to bench/demo_gpu_<UTC date>_<device>.txt as well.
demo_gpu() {
    local out
    out="bench/demo_gpu_$(date -u +%Y%m%d)_${tag}.txt"
    { echo "make demo: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit ${ZEROC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}, ${dev_name}"
      STEPS=${GPU_DEMO_STEPS:-300} make demo 2>&1; } > "$out"
    local rc=$?
    [ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp "$out" "$OUT/"
    grep -v "^step " "$out" | tail -n 30; grep "^step " "$out" | sed -n '1p;$p'
    [ $rc -eq 0 ] || { echo "make demo exited with $rc"; return 1; }
    grep -q "^demo: GPU found" "$out" || { echo "make demo did not take its GPU branch"; return 1; }
    grep -q "^sample" "$out" || { echo "make demo printed no sample"; return 1; }
    "$PY" - out/demo_gpu.jsonl <<'PYEOF'
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
print(f"make demo: {len(l)} steps, train loss {l[0]:.4f} -> {l[-1]:.4f}")
sys.exit(0 if len(l) >= 10 and l[-1] < l[0] - 1.0 else 1)
PYEOF
}

# ZeRO-Infinity on the GPU (zero/device.cuh): the master, m and v streamed from NVMe through CPU-Adam,
# and at stage 3 the bf16 parameter shard read from NVMe one unit ahead of its gather, against CPU
# offload (everything in pinned memory): every loss and every checkpoint byte identical
nvme_gpu() {
    source tests/lib.sh     # make_shard, $TMP on this machine's disk (removed when this stage's shell exits)
    PY=$GPU_CHECK_PY
    make_shard "$TMP/train.bin" 100000 500
    mkdir -p "$TMP/nvme"
    local rc=0 z M="--preset tiny --vocab 500 --batch 4 --seq 64 --accum 2 --steps 6 --quiet 1"
    for z in 1 3; do
        local nv="--offload-nvme $TMP/nvme --nvme-tile 4096"
        [ $z = 3 ] && nv="$nv --offload-param-nvme $TMP/nvme --persistence-threshold 0"
        run_t ./build/gpu_z${z}_o1/train_gpt $M --train "$TMP/train.bin" --log "$TMP/cpu$z.jsonl" --save "$TMP/cpu$z" > "$TMP/cpu$z.out" 2>&1 &&
            run_t ./build/gpu_z${z}_o1/train_gpt $M --train "$TMP/train.bin" --log "$TMP/nvme$z.jsonl" --save "$TMP/nvme$z" $nv --quiet 0 \
                > "$TMP/nvme$z.out" 2>&1 || { tail -n 5 "$TMP/cpu$z.out" "$TMP/nvme$z.out"; rc=1; continue; }
        grep -E "^ZeRO-Infinity|^       \(one file" "$TMP/nvme$z.out"
        "$PY" - "$TMP/cpu$z.jsonl" "$TMP/nvme$z.jsonl" "$z" <<'PYEOF' || rc=1
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

# Twin-Flow at stage 3 (--offload-ratio 0.5: the GPU AdamW on the shard's first sub-groups, CPU-Adam on the
# rest): its losses within bf16's rounding of ratio 1's; resumed from its step-4 checkpoint, bitwise the
# run that saved it; resumed from ratio 1's checkpoint, within rounding of ratio 1 (one checkpoint format)
twin_gpu() {
    local B=./build/gpu_z3_o1/train_gpt D="$TMP/train.bin"
    local M="--preset tiny --vocab 500 --batch 4 --seq 64 --accum 2 --steps 8 --quiet 1 --offload 1 --sub-group-size 4000"
    run_t $B $M --train "$D" --save "$TMP/tw1" --save-every 4 --log "$TMP/tw1.jsonl" > "$TMP/tw1.out" 2>&1 &&
        run_t $B $M --train "$D" --offload-ratio 0.5 --quiet 0 --save "$TMP/tw5" --save-every 4 --log "$TMP/tw5.jsonl" \
            > "$TMP/tw5.out" 2>&1 &&
        run_t $B $M --train "$D" --offload-ratio 0.5 --resume "$TMP/tw5/ckpt_00000004" --log "$TMP/twr.jsonl" > "$TMP/twr.out" 2>&1 &&
        run_t $B $M --train "$D" --offload-ratio 0.5 --resume "$TMP/tw1/ckpt_00000004" --log "$TMP/twx.jsonl" > "$TMP/twx.out" 2>&1 ||
        { tail -n 5 "$TMP"/tw*.out; return 1; }
    grep "^Twin-Flow, ratio" "$TMP/tw5.out"
    grep -q "^Twin-Flow, ratio 0.5: .*shard \[0, [1-9][0-9]*) on the device side" "$TMP/tw5.out" || { echo "Twin-Flow: no device side"; return 1; }
    "$PY" - "$TMP/tw1.jsonl" "$TMP/tw5.jsonl" "$TMP/twr.jsonl" "$TMP/twx.jsonl" <<'PYEOF'
import json, math, sys
one, half, res, cross = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in sys.argv[1:5])
close = lambda a, b: len(a) == len(b) > 0 and all(abs(x - y) <= 1e-2 * abs(y) for x, y in zip(a, b))   # bf16's 8 bits
print("Twin-Flow: ratio 1 %s\nratio 0.5 %s: %s\nratio 0.5 resumed at 4 %s: %s\nratio 0.5 from ratio 1's step-4 checkpoint %s: %s" % (
      one, half, "within 1%" if close(half, one) else "DIFFERENT", res, "identical" if half[4:] == res else "DIFFERENT",
      cross, "within 1%" if close(cross, one[4:]) else "DIFFERENT"))
sys.exit(0 if len(one) == 8 and close(half, one) and half[4:] == res and close(cross, one[4:]) and all(map(math.isfinite, half)) else 1)
PYEOF
}

# ZeRO-Offload's delayed parameter update (zero/dpu.h) at stage 2: --dpu-warmup past the run's end gives
# offload's numbers bitwise (DPU's copy is then offload's staging); with the delay from update 3 on, a run
# resumed from its step-4 checkpoint is bitwise the one that saved it; the delayed losses within bf16's drift
# of the CPU trainer's DPU from the same seed (1e-3: section 2 of test_gpu.sh measured 1e-4 at lr 1e-3), where
# DPU itself moves the CPU's losses by 1.2e-2 (measured here, so the check tells them apart); then Twin-Flow's
dpu_gpu() {
    source tests/lib.sh
    PY=$GPU_CHECK_PY
    make_shard "$TMP/train.bin" 100000 500
    local rc=0 B=./build/gpu_z2_o1/train_gpt M="--preset tiny --vocab 500 --batch 4 --seq 64 --accum 2 --steps 8 --quiet 1 --offload 1"
    run_t $B $M --train "$TMP/train.bin" --log "$TMP/off.jsonl" > "$TMP/off.out" 2>&1 &&
        run_t $B $M --train "$TMP/train.bin" --offload-dpu 1 --dpu-warmup 100 --log "$TMP/late.jsonl" > "$TMP/late.out" 2>&1 &&
        run_t $B $M --train "$TMP/train.bin" --offload-dpu 1 --dpu-warmup 2 --save "$TMP/ck" --save-every 4 --log "$TMP/dpu.jsonl" \
            > "$TMP/dpu.out" 2>&1 &&
        run_t $B $M --train "$TMP/train.bin" --offload-dpu 1 --dpu-warmup 2 --resume "$TMP/ck/ckpt_00000004" --log "$TMP/res.jsonl" \
            > "$TMP/res.out" 2>&1 || { tail -n 5 "$TMP"/*.out; return 1; }
    "$PY" - "$TMP/off.jsonl" "$TMP/late.jsonl" "$TMP/dpu.jsonl" "$TMP/res.jsonl" <<'PYEOF' || rc=1
import json, math, sys
off, late, dpu, res = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in sys.argv[1:5])
print("offload %s\nDPU, never delayed %s: %s\nDPU from update 3 %s; resumed at 4 %s: %s" % (off, late, "identical" if off == late else "DIFFERENT",
      dpu, res, "identical" if dpu[4:] == res else "DIFFERENT"))
sys.exit(0 if off == late and len(off) == 8 and dpu[4:] == res and all(map(math.isfinite, dpu)) else 1)
PYEOF
    local S="--arch gpt2 --preset tiny --dim 64 --heads 4 --ffn 160 --vocab 500 --max-seq 32 --seq 32 --batch 4 --steps 20 --lr 2e-3 --seed 7"
    S="$S --quiet 1 --train $TMP/train.bin --offload-dpu 1 --dpu-warmup 1"
    run_t $B $S --offload 1 --log "$TMP/gd.jsonl" > "$TMP/gd.out" 2>&1 && run_t ./build/z0/train_gpt_cpu $S --log "$TMP/cd.jsonl" > "$TMP/cd.out" 2>&1 &&
        run_t ./build/z0/train_gpt_cpu ${S% --offload-dpu*} --log "$TMP/cn.jsonl" > "$TMP/cn.out" 2>&1 || { tail -n 5 "$TMP"/gd.out "$TMP"/c?.out; rc=1; }
    "$PY" - "$TMP/gd.jsonl" "$TMP/cd.jsonl" "$TMP/cn.jsonl" <<'PYEOF' || rc=1
import json, sys
gpu, cpu, plain = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in sys.argv[1:4])
rel = lambda a, b: max(abs(x - y) / abs(y) for x, y in zip(a, b)) if len(a) == len(b) == 20 else float("inf")
print("DPU, GPU against the CPU trainer's DPU: max rel %.2e (tolerance 1e-3); the CPU's DPU against no DPU: %.2e (at least 5e-3)"
      % (rel(gpu, cpu), rel(cpu, plain)))
sys.exit(0 if rel(gpu, cpu) <= 1e-3 and rel(cpu, plain) >= 5e-3 else 1)
PYEOF
    twin_gpu || rc=1
    return $rc
}

# ----------------------------------------------------------------------------

# llm.c's train_gpt2cu (bench/llmc_build.sh, from the carried .llmc), built in the background once zeroc's
# build is done (CPU work, beside the GPU stages), in a session of its own; its output to LLMC_LOG as written
llmc_build_start() {
    [[ ",$ONLY," == *",llmc,"* ]] && [ -f .llmc/llm.c/train_gpt2.cu ] || return 0
    mkdir -p "$LLMC_DIR"
    echo "llm.c: bench/llmc_build.sh started in the background (its log: $LLMC_LOG)"
    setsid bash -c 'echo $$ > "$1/pid"; timeout -k 5 "$2" bash bench/llmc_build.sh "$1" 2>&1 | tee -a "$3" $4 > /dev/null
                    echo "${PIPESTATUS[0]}" > "$1/rc"' llmc-build "$LLMC_DIR" "${GPU_CHECK_LLMC_BUILD_LIMIT:-300}" "$LLMC_LOG" \
        "$(out_copy "$LLMC_LOG")" < /dev/null > /dev/null 2>&1 &
}
llmc_stage() {
    [ -f .llmc/llm.c/train_gpt2.cu ] || { echo "no .llmc/llm.c: run scripts/llmc_fetch.sh on the build machine and carry .llmc"; return 77; }
    local t0; t0=$(date +%s)
    while [ ! -e "$LLMC_DIR/rc" ]; do sleep 1; done   # (this stage's limit bounds the wait)
    echo "llm.c's build, started after zeroc's: waited $(( $(date +%s) - t0 ))s for it to end"
    grep "^llmc:" "$LLMC_LOG"
    [ "$(cat "$LLMC_DIR/rc")" = 0 ] || { tail -n 30 "$LLMC_LOG"; echo "llm.c's build failed (exit $(cat "$LLMC_DIR/rc"))"; return 1; }
    LLMC_DIR=$LLMC_DIR bash bench/gpu_train.sh llmc
}

main() {
    facts
    echo; echo "######## env: our Debian libraries from .gpu_deps (scripts/gpu_env.sh)"
    local t0; t0=$(date +%s)
    # shellcheck source=scripts/gpu_env.sh
    if source scripts/gpu_env.sh; then results+=("env|.gpu_deps unpacked, PATH and library paths set|PASS|$(( $(date +%s) - t0 ))")
    else results+=("env|.gpu_deps unpacked, PATH and library paths set|FAIL|$(( $(date +%s) - t0 ))"); fi
    # a python with torch: on the GPU machine the image's python3 (/opt/torch/.venv/bin/python3)
    PY=python3
    for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
        if [ -n "$cand" ] && zeroc_torch timeout -k 2 "$PROBE_T" "$cand" -c "import torch" >/dev/null 2>&1; then PY=$cand; break; fi
    done
    GPU_CHECK_PY=$PY
    cuda_libs
    facts_libs
    export -f build kernel_list kernels test_sections nccl_stage lib_probe nccl_candidates cs_find cs_memcheck cs_racecheck \
        cs_initcheck sanitize_new sanitize_default tensorboard_hook hf_export_hook compare hf_transformers fp16_run demo_gpu nvme_gpu dpu_gpu twin_gpu \
        llmc_stage out_copy run_t torch_t probe
    export TMPD ZEROC_COMMIT tag dev_name NVCC PY GPU_CHECK_PY NEW_PATHS KERNELS_VALIDATED KERNELS_FIRST GROUPS_LOG LLMC_LOG LLMC_DIR \
        RUN_T CS_T OUT PROBE_T
    export GPU_TRAIN_ROWS="$TMPD/gpu_train_rows"
    # most informative first: what the budget cuts comes last
    stage build "build (sm_90, make -j)" 150 60 build
    llmc_build_start
    stage kernels "dev/cuda programs of the paths not yet run" 120 70 kernels pending
    stage test_new "test_gpu.sh: the opt-in paths against the default (9-12, 14, 15), the default against PyTorch and the CPU (1-2)" 200 120 \
        test_sections test_new $TEST_NEW
    stage sanitize "compute-sanitizer on the opt-in paths' kernels" 120 60 sanitize_new
    stage speed "GPT-2 124M, B=16, T=1024: the default, each opt-in path, all, the default again (bench/gpu_train.sh pairs)" 120 70 \
        bash bench/gpu_train.sh pairs
    stage llmc "llm.c's train_gpt2cu beside zeroc: GPT-2 124M, B=16, T=1024 on this GPU (bench/gpu_train.sh llmc)" 180 25 llmc_stage
    stage nccl "NCCL with 2 ranks on one GPU against host-staged MPI (test_gpu.sh 13)" 90 30 nccl_stage
    stage torch "PyTorch eager and torch.compile, the same GPU and model (bench/gpu_train.sh torch)" 150 70 bash bench/gpu_train.sh torch
    stage test_rest "test_gpu.sh 3-8: the default path again (refactored since it ran)" 180 60 test_sections test_rest $TEST_REST
    stage kernels_rest "dev/cuda programs that passed on 2026-11-22, unchanged" 90 40 kernels validated
    stage nvme "NVMe offload (ZeRO-Infinity) vs CPU offload, bitwise" 60 45 nvme_gpu
    stage dpu "ZeRO-Offload's delayed parameter update and Twin-Flow: bitwise, resume and CPU checks" 60 35 dpu_gpu
    stage offload_speed "GPT-2 124M: offload, DPU (stage 2) and Twin-Flow's ratios (stage 3) against no offload (bench/gpu_train.sh offload)" \
        150 80 bash bench/gpu_train.sh offload
    stage tensorboard "TensorBoard's reader on the trainer's event files (hook)" 30 5 tensorboard_hook
    stage hf_export "transformers loads an exported folder, model and tokenizer (hook)" 60 20 hf_export_hook
    stage sanitize_default "compute-sanitizer on the default path" 150 100 sanitize_default
    stage sample "sampling: KV cache vs full forward, --sample 1 (test_sample_gpu.sh)" 90 45 bash tests/test_sample_gpu.sh
    stage fp16 "fp16 build: GPT-2 124M on Brown, loss scaling" 60 10 fp16_run
    stage hf "transformers: export in GPT2LMHeadModel/LlamaForCausalLM vs zeroc" 60 45 hf_transformers
    stage bench_stages "GPT-2 124M: --breakdown, stage 3, offload, llama, recompute (bench/gpu_train.sh stages)" 150 60 \
        bash bench/gpu_train.sh stages
    stage compare "GPT-2 124M, zeroc vs PyTorch on this GPU (bench/gpu_compare)" 420 130 compare
    stage demo "make demo (README's first command) on the GPU" 240 60 demo_gpu

    echo; echo "######## summary ($(elapsed)s of ${BUDGET}s; ${dev_name:-no GPU})"
    printf '| %-12s | %-100s | %-16s | %6s |\n' "stage" "what" "result" "time"
    printf '|%s|%s|%s|%s|\n' "--------------" "$(printf -- '-%.0s' {1..102})" "------------------" "--------"
    local r k n s t pass=0 fail=0 skip=0
    for r in "${results[@]}"; do
        IFS='|' read -r k n s t <<< "$r"
        printf '| %-12s | %-100s | %-16s | %5ss |\n' "$k" "${n:0:100}" "$s" "$t"
        case $s in PASS) pass=$((pass + 1));; SKIP*) skip=$((skip + 1));; *) fail=$((fail + 1));; esac
    done
    [ -s "$LLMC_DIR/pid" ] && [ ! -e "$LLMC_DIR/rc" ] && pkill -KILL -s "$(cat "$LLMC_DIR/pid")" 2>/dev/null   # a build no stage waited for
    echo "full log: $LOG${OUT:+ (and \$OUT/$(basename "$LOG"))}; test_gpu.sh's groups: $GROUPS_LOG"
    if [ -n "${OUT:-}" ] && [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
        echo "warning: $(find "$OUT" -type f | wc -l) files under \$OUT: the device tool brings back 8"
    fi
    echo "gpu_check: $pass passed, $fail failed, $skip skipped"
    [ $fail -eq 0 ]
}

main 2>&1 | tee "$LOG" ${OUT:+"$OUT/$(basename "$LOG")"}
rc=${PIPESTATUS[0]}
rm -rf "$TMPD"
exit "$rc"
