#!/usr/bin/env bash
# The README is the front door, and the docs are where its links lead:
#   1. README.md has at most 300 lines;
#   2. its first code block is the two commands that work on a fresh machine: make demo, make test;
#   3. the GPU line (make train_gpt ZERO=3 && mpirun -np 4 ./train_gpt) comes before the CPU path;
#   4. every relative link in README.md and docs/*.md resolves: the file exists and, for a link into a
#      markdown file, the #anchor is one of its headings (GitHub's slugs);
#   5. every repository path README.md names in `code` (zero.h, train/loop.h, zero/ ...) exists;
#   6. every command README.md shows runs as written, or shortened as tests/readme_examples.py states
#      for each (fewer steps, outputs in a scratch folder, stand-ins for the user's files);
#   7. every output line docs/*.md shows is printed by a run of its example (tests/docs_examples.py).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

n=$(wc -l < README.md)
[ "$n" -le 300 ]; check "README.md has $n lines (at most 300)" $?

first=$(awk '/^```/ { if (on) exit; on = 1; next } on' README.md | awk '{print $1, $2}' | tr '\n' ';')
[ "$first" = "make demo;make test;" ]; st=$?
check "README.md's first code block is 'make demo', 'make test' (found: $first)" $st

gpu=$(grep -n -m1 -F 'make train_gpt ZERO=3 && mpirun -np 4 ./train_gpt' README.md | cut -d: -f1)
cpu=$(grep -n -m1 -F 'make train_gpt_cpu' README.md | cut -d: -f1)
[ -n "$gpu" ] && [ -n "$cpu" ] && [ "$gpu" -lt "$cpu" ]; st=$?
check "the GPU line (line ${gpu:-missing}) comes before the CPU path (line ${cpu:-missing})" $st

out=$($PY - <<'PYEOF'
import glob, os, re, subprocess

def slugs(path):
    """The anchors GitHub gives the headings of a markdown file (code blocks skipped)."""
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"): fence = not fence
        if fence or not re.match(r"#{1,6} ", line): continue
        s = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        k = seen.get(s, 0); seen[s] = k + 1
        out.add(s if k == 0 else "%s-%d" % (s, k))
    return out

def prose(path):
    """The file's lines outside fenced code blocks, with inline code removed."""
    fence = False
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("```"): fence = not fence; continue
        if not fence: yield no, re.sub(r"`[^`]*`", "", line)

problems, links = [], 0
for md in ["README.md"] + sorted(glob.glob("docs/*.md")):
    for no, line in prose(md):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target): continue          # http:, https:, mailto:
            links += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(full):
                problems.append("%s:%d: %s: no such file" % (md, no, target)); continue
            if anchor and full.endswith(".md") and anchor not in slugs(full):
                problems.append("%s:%d: %s: no heading with that anchor in %s" % (md, no, target, full))

# paths README.md names in inline code: files and folders of the repository
tracked = set(subprocess.check_output(["git", "ls-files"]).decode().split())
folders = {os.path.dirname(f) for f in tracked} | {f.split("/")[0] for f in tracked}
named = 0
for no, line in enumerate(open("README.md", encoding="utf-8"), 1):
    for code in re.findall(r"`([^`\s]+)`", line):
        if not re.fullmatch(r"[\w.-]+(/[\w.-]*)*", code) or code.startswith(("out/", "data/", "build/", "./")): continue
        # a folder, a source file, or a data file under a folder (a bare ds_config.json is the user's)
        if not (code.endswith("/") or re.search(r"\.(h|cuh|c|cu|sh|py|md|mk)$", code)
                or ("/" in code and re.search(r"\.(txt|json)$", code))): continue
        named += 1
        p = code.rstrip("/")
        if p not in tracked and p not in folders and not os.path.exists(p):
            problems.append("README.md:%d: `%s`: not in the repository" % (no, code))
print("links %d, paths %d" % (links, named))
for p in problems: print("PROBLEM " + p)
PYEOF
)
st=$?
echo "$out" | sed 's/^/  /'
! echo "$out" | grep -q '^PROBLEM'; st=$((st + $?))
check "every relative link in README.md and docs/*.md resolves, and every path README.md names exists ($(echo "$out" | head -1))" $st

# what README promises of a resume: bitwise only at the same world size and stage (issue 34)
grep -q "at any world size and stage" README.md && ! grep -qi "bit-identical.*any world size\|bitwise.*any world size" README.md &&
    grep -q "^Bitwise at the same world size and stage; at another" README.md && grep -q "agree to float rounding" README.md
check "README says a resume is bitwise at the same world size and stage, within float rounding at another" $?

make -s all zero-bins prepare_data export_model > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; exit 1; }
$PY tests/readme_examples.py "$TMP/examples" > "$TMP/examples.out" 2>&1
st=$?
sed 's/^/  /' "$TMP/examples.out"
check "the README's commands run ($(tail -1 "$TMP/examples.out"))" $st

$PY tests/docs_examples.py "$TMP/docs_examples" > "$TMP/docs.out" 2>&1
st=$?
sed 's/^/  /' "$TMP/docs.out"
check "every output line the docs show is printed by its example ($(tail -1 "$TMP/docs.out"))" $st

[ $fails -eq 0 ]
