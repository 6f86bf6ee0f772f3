#!/usr/bin/env bash
# scripts/llmc_fetch.sh: llm.c's source at a pinned commit, and the cuDNN frontend its flash attention
# builds against, into the git-ignored folder .llmc/ (about 3 MB), which a GPU session carries so that
# scripts/gpu_check.sh's llmc stage builds and runs llm.c's train_gpt2cu beside zeroc on the same GPU
# (bench/llmc_build.sh). Run HERE, before such a session; CI needs none of it.
#
#   bash scripts/llmc_fetch.sh [LLMC_GIT_DIR [CUDNN_FRONTEND_GIT_DIR]]
#
# The two arguments are git directories holding the pinned commits: clones of
# https://github.com/karpathy/llm.c and https://github.com/NVIDIA/cudnn-frontend. In this workplace only
# the device tool's `fetch` reaches GitHub: fetch github:karpathy/llm.c and github:NVIDIA/cudnn-frontend,
# which leave them at the defaults below (.mirror/<owner>+<name>/repo beside the checkout, MIRROR);
# elsewhere, git clone them.
#   llm.c           f1e2ace651495b74ae22d45d1723443fd00ecd3a (2025-05-10, its last commit, "Merge pull
#                   request #801"): train_gpt2.cu, llmc/ and LICENSE, as they are
#   cudnn-frontend  666996fe3960f27170d1527e5579ba24c8d3380a (v1.12.0, 2025-05-19, the release after that
#                   commit): include/ and LICENSE.txt; header-only. Later releases call NVRTC from the
#                   headers (their llm.c build needs -lnvrtc -lcuda); this one builds llm.c's
#                   cudnn_att.cpp for sm_90 with CUDA 13.0 and cuDNN 9.19 as it stands (checked here)
# Nothing of either is changed. .llmc/SOURCE records where each came from.
set -euo pipefail
cd "$(dirname "$0")/.."
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a
FRONTEND_COMMIT=666996fe3960f27170d1527e5579ba24c8d3380a
MIRROR=${MIRROR:-../.mirror}
LLMC_GIT=${1:-$MIRROR/karpathy+llm.c/repo}
FRONTEND_GIT=${2:-$MIRROR/NVIDIA+cudnn-frontend/repo}
DEST=.llmc

have() {   # GIT_DIR COMMIT NAME
    git --git-dir="$1" cat-file -e "$2^{commit}" 2>/dev/null ||
        { echo "llmc_fetch: error: $1 has no commit $2 of $3 (fetch github:$3 with the device tool's fetch, or git clone it, and name its git directory)" >&2; exit 1; }
}
have "$LLMC_GIT" "$LLMC_COMMIT" karpathy/llm.c
have "$FRONTEND_GIT" "$FRONTEND_COMMIT" NVIDIA/cudnn-frontend
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/llm.c" "$DEST.tmp/cudnn-frontend"
git --git-dir="$LLMC_GIT" archive "$LLMC_COMMIT" train_gpt2.cu llmc LICENSE | tar -x -C "$DEST.tmp/llm.c"
git --git-dir="$FRONTEND_GIT" archive "$FRONTEND_COMMIT" include LICENSE.txt | tar -x -C "$DEST.tmp/cudnn-frontend"
printf 'llm.c %s (github.com/karpathy/llm.c)\ncudnn-frontend %s v1.12.0 (github.com/NVIDIA/cudnn-frontend)\n' \
    "$LLMC_COMMIT" "$FRONTEND_COMMIT" > "$DEST.tmp/SOURCE"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "llmc_fetch: $DEST/ ($(du -sh "$DEST" | cut -f1)): llm.c ${LLMC_COMMIT:0:7}, cudnn-frontend v1.12.0 (${FRONTEND_COMMIT:0:7})"
