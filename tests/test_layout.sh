#!/usr/bin/env bash
# The layout draws the architecture (docs/layout.md):
#   1. the root holds the top level only: the two trainers and their tests, zero.h, adamw.cuh,
#      dataloader.h, tokenizer.h, the Makefile and README; everything else is in a folder;
#   2. no include circle between files;
#   3. no circle between folders either (a root header counts as its own node): a folder's file
#      never includes a root header that includes that folder back ("climbing back up");
#   4. every header compiles on its own (it includes what it uses), except the few that are
#      templates over a trainer's GPT and say so in their first lines.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

out=$($PY - <<'PYEOF'
import os, re, subprocess, sys
ROOT_FILES = {"train_gpt.c", "train_gpt.cu", "test_gpt.c", "test_gpt.cu", "zero.h", "adamw.cuh", "dataloader.h",
              "tokenizer.h", "Makefile", "README.md", "package.json", "package-lock.json", ".gitignore"}
tracked = subprocess.check_output(["git", "ls-files"]).decode().split()
problems = []
extra = sorted({f for f in tracked if "/" not in f} - ROOT_FILES)
if extra: problems.append("files at the root beyond the top level: " + " ".join(extra))
print("root: %d files (%s)" % (sum("/" not in f for f in tracked), ", ".join(sorted(f for f in tracked if "/" not in f))))

src = [f for f in tracked if re.search(r"\.(h|cuh|c|cu)$", f)]
inc = {f: re.findall(r'^\s*#\s*include\s*"([^"]+)"', open(f, encoding="utf-8").read(), re.M) for f in src}
for f, names in inc.items():
    for n in names:
        if n not in inc: problems.append("%s includes %s, which is not a tracked file (includes are written from the root)" % (f, n))

def cycles(graph):
    state, found = {}, []
    def walk(u, path):
        state[u] = 1
        for v in graph.get(u, ()):
            if state.get(v) == 1: found.append(path[path.index(v):] + [v])
            elif v not in state: walk(v, path + [v])
        state[u] = 2
    for u in sorted(graph):
        if u not in state: walk(u, [u])
    return found

for c in cycles(inc): problems.append("include circle: " + " -> ".join(c))
node = lambda f: os.path.dirname(f).split("/")[0] if "/" in f else f
folders = {}
for f, names in inc.items():
    for n in names:
        if node(f) != node(n): folders.setdefault(node(f), set()).add(node(n))
for c in cycles(folders): problems.append("folders include each other: " + " -> ".join(c))
print("include graph: %d files, %d includes; folders: %s" % (len(inc), sum(map(len, inc.values())),
      "; ".join("%s -> %s" % (a, ",".join(sorted(b))) for a, b in sorted(folders.items())
                if a not in ("tests", "dev", "bench", "tools") and "/" not in a and not a.startswith(("train_gpt", "test_gpt")))))
for p in problems: print("PROBLEM " + p)
PYEOF
)
st=$?
echo "$out" | sed 's/^/  /'
! echo "$out" | grep -q '^PROBLEM'
check "root holds the top level only, no include circle between files or folders" $((st + $?))

# 4. headers that compile alone: C headers with mpicc -fsyntax-only, .cuh with nvcc's front end only
# (-cuda: parsed and type-checked, no device code generated), two at a time
one_header() {
    local h="$1" t="$2/$(echo "$1" | tr / _)"
    # a template over the trainer's GPT says so in its first lines: "Include this file after"
    head -n 40 "$h" | grep -q 'Include this file after' && return 0
    case "$h" in
        *.cuh) command -v nvcc >/dev/null || return 0
               echo "#include \"$h\"" > "$t.cu"
               nvcc -ccbin mpicc -std=c++17 -I. -Xcompiler -fopenmp,-D_GNU_SOURCE -diag-suppress 177,550 \
                    -gencode=arch=compute_90,code=sm_90 -cuda "$t.cu" -o "$t.ii" > "$t.err" 2>&1 ;;
        *)     echo "#include \"$h\"" > "$t.c"
               mpicc -fsyntax-only -fopenmp -std=gnu11 -D_GNU_SOURCE -Wall -Wno-unused-function -I. \
                     -I/usr/include/x86_64-linux-gnu/openblas-openmp "$t.c" > "$t.err" 2>&1 ;;
    esac || echo "$h: $(grep -m1 error "$t.err")"
}
export -f one_header
headers=$(printf '%s\n' zero.h adamw.cuh dataloader.h tokenizer.h $(git ls-files '*/*.h' '*/*.cuh' | grep -vE '^(tests|dev|bench)/'))
bad=$(echo "$headers" | xargs -P 2 -I{} bash -c 'one_header {} '"$TMP")
[ -n "$bad" ] && echo "$bad" | sed 's/^/  not self-contained: /'
check "each of $(echo "$headers" | wc -l) headers compiles on its own (the trainer templates excepted)" $([ -z "$bad" ]; echo $?)

[ $fails -eq 0 ]
