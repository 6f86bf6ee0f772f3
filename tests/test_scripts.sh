#!/usr/bin/env bash
# The scripts as a user runs them:
#   - they run with a Python that has their modules whatever python3 comes first on PATH
#     (scripts/need_modules.py): a stand-in python3 without the site directories (as a pyenv or
#     virtualenv python3 without numpy, torch and matplotlib) is first on PATH;
#   - scripts/plot_losses.py draws a run and its resume as one curve, whether the resume appended
#     to the same --log or wrote another file; two separate runs are still compared;
#   - a second `make demo` (scripts/demo.sh) starts from scratch: the previous demo's checkpoints
#     are moved to demo_ckpt.prev, none stays beside the new ones.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
TR=./build/z0/train_gpt_cpu
[ -x $TR ] || { echo "FAIL: $TR missing (make -s zero-bins)"; exit 1; }
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --batch 2 --seq 32 --threads 1 --quiet 1 --train $TMP/train.bin --val $TMP/train.bin"

echo "== the Python that has the modules"
mkdir -p "$TMP/bin"
printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v /usr/bin/python3 || command -v python3)" > "$TMP/bin/python3"
chmod +x "$TMP/bin/python3"
$TR $M --steps 3 --log "$TMP/p.jsonl" > /dev/null 2>&1
if "$TMP/bin/python3" -c "import matplotlib" 2> /dev/null; then
    echo "  (the stand-in python3 imports matplotlib: nothing to test)"
else
    env -u PYTHON PATH="$TMP/bin:$PATH" python3 scripts/plot_losses.py "$TMP/p.jsonl" --out "$TMP/p.png" > "$TMP/p.out" 2>&1
    st=$?
    check "plot_losses.py under a python3 without matplotlib: $(grep -m1 note "$TMP/p.out")" \
        $([ $st -eq 0 ] && [ -s "$TMP/p.png" ] && grep -q "note: plot_losses.py: the Python that ran it (.*) cannot import matplotlib; running it with " "$TMP/p.out"; echo $?)
fi
need() { PYTHONPATH=scripts "$PY" -c "import need_modules, sys; need_modules.require('zeroc_no_such_module', status=$1)" 2>&1; }
out=$(need 1); st=$?
check "a module no Python has: one error line, exit 1: $out" $([ $st -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && [[ $out == "error: "* ]]; echo $?)
out=$(need 77); st=$?
check "... a check that needs it is skipped: exit 77" $([ $st -eq 77 ] && [[ $out == "skip: "* ]]; echo $?)

echo "== plot_losses.py: a run and its resume are one curve"
# a run killed after step 8 whose last checkpoint is step 6, resumed to step 10: steps 7 and 8 are run again
$TR $M --steps 8 --save "$TMP/ck" --save-every 6 --log "$TMP/a.jsonl" > /dev/null 2>&1
rm -rf "$TMP/ck/ckpt_00000008" && echo ckpt_00000006 > "$TMP/ck/latest"
cp "$TMP/a.jsonl" "$TMP/same.jsonl"
$TR $M --steps 10 --save "$TMP/ck" --resume "$TMP/ck" --log "$TMP/b.jsonl" > /dev/null 2>&1
rm -rf "$TMP/ck/ckpt_00000010" && echo ckpt_00000006 > "$TMP/ck/latest"
$TR $M --steps 10 --save "$TMP/ck" --resume "$TMP/ck" --log "$TMP/same.jsonl" > /dev/null 2>&1
last=$($PY -c "import json,sys; print('%.6f' % [r['loss'] for r in map(json.loads, open(sys.argv[1])) if r['type'] == 'train'][-1])" "$TMP/b.jsonl")
$PY scripts/plot_losses.py "$TMP/a.jsonl" "$TMP/b.jsonl" --out "$TMP/ab.png" > "$TMP/ab.out" 2>&1
st=$?
summary=$(grep "^a + b:" "$TMP/ab.out")
check "two files: $summary" $([ $st -eq 0 ] && [ -s "$TMP/ab.png" ] && grep -q "b.jsonl continues a from step 7" "$TMP/ab.out" &&
    [[ $summary == "a + b: 10 steps, loss "*" -> $last, resumed at step 7" ]]; echo $?)
$PY scripts/plot_losses.py "$TMP/same.jsonl" --out "$TMP/same.png" > "$TMP/same.out" 2>&1
st=$?
summary=$(grep "^same:" "$TMP/same.out")
check "one file the resume appended to: $summary" \
    $([ $st -eq 0 ] && [[ $summary == "same: 10 steps, loss "*" -> $last, resumed at step 7" ]]; echo $?)
$TR $M --steps 10 --seed 7 --log "$TMP/c.jsonl" > /dev/null 2>&1
$PY scripts/plot_losses.py "$TMP/b.jsonl" "$TMP/c.jsonl" > "$TMP/bc.out" 2>&1; st=$?
check "a resume and another run are compared, not joined: $(tail -1 "$TMP/bc.out")" \
    $([ $st -eq 0 ] && grep -q "max |loss diff| over 4 steps" "$TMP/bc.out" && ! grep -q joined "$TMP/bc.out"; echo $?)

echo "== a second make demo starts from scratch"
if nvidia-smi -L > /dev/null 2>&1; then
    echo "  (a GPU is here: the demo trains GPT-2 124M and saves no checkpoints; not run)"
else
    mkdir -p "$TMP/out/demo_ckpt/ckpt_00000300" && echo ckpt_00000300 > "$TMP/out/demo_ckpt/latest"
    OUT="$TMP/out" STEPS=0 NP=1 ZERO=0 bash scripts/demo.sh > "$TMP/demo.out" 2>&1
    st=$?
    check "the previous checkpoints moved aside, only the new run's in demo_ckpt: $(grep -m1 'from scratch' "$TMP/demo.out")" \
        $([ $st -eq 0 ] && [ "$(ls "$TMP/out/demo_ckpt" | tr '\n' ' ')" = "ckpt_00000000 latest " ] &&
          [ -d "$TMP/out/demo_ckpt.prev/ckpt_00000300" ]; echo $?)
fi
[ $fails -eq 0 ]
