#!/usr/bin/env bash
# bench/llmc_build.sh [OUT_DIR]: llm.c's train_gpt2cu, from .llmc/ (scripts/llmc_fetch.sh: llm.c at
# f1e2ace, cudnn-frontend v1.12.0, carried to the GPU machine), built for this machine's GPU as llm.c's
# Makefile builds it for one GPU in bf16 (make train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1):
#   nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -DENABLE_BF16 for sm_<the GPU's compute capability>
#   with cuDNN's flash attention (-DENABLE_CUDNN, llmc/cudnn_att.cpp, -lcudnn) where cudnn.h and libcudnn
#   are found (the CUDA toolkit's, the system's, or PyTorch's nvidia-cudnn wheel), else llm.c's own
#   attention kernels; the one line it prints says which, and why.
# Not through llm.c's Makefile: it links -lnvidia-ml whether or not nvml.h exists, and CUDA 13 needs one
# overload that llm.c predates (-include bench/llmc_compat.h); llm.c's source is built as pinned.
# Checked on the build machine (CUDA 13.0.88, cuDNN 9.19, sm_90): both ways compile and link.
# Writes OUT_DIR (default build/llmc)/train_gpt2cu, OUT_DIR/attention ("cuDNN 9.x" or "llm.c's own
# kernels") and OUT_DIR/lib_path (the directory libcudnn must be loaded from, or nothing).
# Exit 77 with one line when .llmc is missing.
cd "$(dirname "$0")/.." || exit 1
OUTD=${1:-build/llmc}
SRC=.llmc/llm.c FRONTEND=.llmc/cudnn-frontend/include
[ -f "$SRC/train_gpt2.cu" ] || { echo "llmc: no $SRC/train_gpt2.cu: run scripts/llmc_fetch.sh on the build machine and carry .llmc"; exit 77; }
mkdir -p "$OUTD/lib"
rm -f "$OUTD/train_gpt2cu" "$OUTD/attention" "$OUTD/lib_path"
T0=$(date +%s)
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$(command -v nvcc || echo "$CUDA/bin/nvcc")}
PY=${GPU_CHECK_PY:-python3}
cc=$(timeout 10 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. \r')
[[ $cc =~ ^[0-9]+$ ]] || cc=90
FLAGS=(--threads=0 -t=0 --use_fast_math -std=c++17 -O3 "--generate-code=arch=compute_$cc,code=[compute_$cc,sm_$cc]"
       -DENABLE_BF16 -include bench/llmc_compat.h)
LIBS=(-lcublas -lcublasLt)

# llm.c's mfu.h uses NVML when nvml.h exists: then link it (the toolkit's stub, or the driver's library)
if [ -f "$CUDA/include/nvml.h" ]; then
    d=""
    for c in "$CUDA/lib64/stubs" "$CUDA/lib64" /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64; do
        [ -e "$c/libnvidia-ml.so" ] && { d=$c; break; }
    done
    if [ -z "$d" ]; then
        so=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml.so.1 / {print $NF; exit}')
        [ -n "$so" ] && ln -sf "$so" "$OUTD/lib/libnvidia-ml.so" && d=$OUTD/lib
    fi
    [ -n "$d" ] && LIBS+=(-L"$d" -lnvidia-ml)
fi

# cuDNN: the header and the library of one installation
cudnn_inc="" cudnn_lib="" cudnn_from=""
wheel=$(timeout 20 "$PY" -c 'import nvidia.cudnn, os; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
for pair in "$CUDA/include:$CUDA/lib64" /usr/include:/usr/lib/x86_64-linux-gnu /usr/include/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu \
            ${wheel:+"$wheel/include:$wheel/lib"}; do
    inc=${pair%%:*} lib=${pair#*:}
    [ -f "$inc/cudnn.h" ] || continue
    so=$(ls "$lib"/libcudnn.so "$lib"/libcudnn.so.[0-9]* 2>/dev/null | head -n 1)
    [ -n "$so" ] || continue
    [ -e "$lib/libcudnn.so" ] || ln -sf "$so" "$OUTD/lib/libcudnn.so"
    cudnn_inc=$inc cudnn_lib=$lib cudnn_from=$inc
    break
done
cudnn_version=$(cat "$cudnn_inc/cudnn_version.h" "$cudnn_inc/cudnn.h" 2>/dev/null | grep -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' |
                awk '!seen[$2]++ {printf "%s%s", (n++ ? "." : ""), $3}')
why=""
[ -n "$cudnn_inc" ] || why="no cudnn.h with a libcudnn beside it (the toolkit, /usr, the nvidia-cudnn wheel)"
[ -n "$cudnn_inc" ] && [ ! -f "$FRONTEND/cudnn_frontend.h" ] && why="no $FRONTEND (scripts/llmc_fetch.sh)"

if [ -z "$why" ]; then
    inc=(-I"$FRONTEND" -I"$cudnn_inc")
    "$NVCC" -c "${FLAGS[@]}" -DENABLE_CUDNN "${inc[@]}" "$SRC/llmc/cudnn_att.cpp" -o "$OUTD/cudnn_att.o" > "$OUTD/cudnn_att.log" 2>&1 &
    att=$!
    "$NVCC" -c "${FLAGS[@]}" -DENABLE_CUDNN "${inc[@]}" "$SRC/train_gpt2.cu" -o "$OUTD/train_gpt2.o" || why="train_gpt2.cu did not compile with ENABLE_CUDNN"
    wait $att || { tail -n 20 "$OUTD/cudnn_att.log"; why="llmc/cudnn_att.cpp did not compile (its last lines above)"; }
    if [ -z "$why" ]; then
        "$NVCC" "${FLAGS[@]}" "$OUTD/train_gpt2.o" "$OUTD/cudnn_att.o" "${LIBS[@]}" -L"$cudnn_lib" -L"$OUTD/lib" -lcudnn \
            -o "$OUTD/train_gpt2cu" || why="linking with -lcudnn failed"
    fi
    if [ -z "$why" ]; then
        echo "cuDNN ${cudnn_version:-?}" > "$OUTD/attention"
        [ "$cudnn_lib" = "$CUDA/lib64" ] || echo "$cudnn_lib" > "$OUTD/lib_path"
        echo "llmc: train_gpt2cu built for sm_$cc with cuDNN attention (cuDNN ${cudnn_version:-?} from $cudnn_from) in $(( $(date +%s) - T0 )) s"
        exit 0
    fi
fi
"$NVCC" "${FLAGS[@]}" "$SRC/train_gpt2.cu" "${LIBS[@]}" -o "$OUTD/train_gpt2cu" ||
    { echo "llmc: train_gpt2cu did not build (nvcc's errors above)"; exit 1; }
echo "llm.c's own kernels" > "$OUTD/attention"
echo "llmc: train_gpt2cu built for sm_$cc with llm.c's own attention kernels ($why) in $(( $(date +%s) - T0 )) s"
