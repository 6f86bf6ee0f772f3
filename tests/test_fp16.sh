#!/usr/bin/env bash
# fp16 with DeepSpeed's dynamic loss scaling and the skipping of non-finite steps
# (train/step_guard.h, train/loss_scaler.h, the CPU trainer's fp16 mode in zero/host.h):
#   1. scale sequences: --inject-nonfinite puts Inf/NaN into one rank's gradients at chosen
#      steps; the loss scale of every step, the skipped steps and the learning rate (the
#      schedule does not advance on a skipped step) equal tests/deepspeed_ref.py's
#      DynamicLossScaler / WarmupLR, for several windows, hystereses and minimums, at 1 rank
#      and at 3 ranks with the injection on a rank that does not log; the same run at every
#      ZeRO stage; an overflow at the minimum scale stops the run with DeepSpeed's message
#   2. the fp16 mode is real: overflows of the fp16 range happen by themselves at a high
#      scale and the scaler brings it down as DeepSpeed's would; fp16 training follows fp32
#      closely (the unscaled gradient norm, the losses)
#   3. a skipped step changes nothing: checkpoints saved before and after it are bitwise
#      equal (fp16 and fp32); resuming an fp16 run restores the scaler: bitwise identical,
#      shuffled data and temperature-1 samples included
#   4. non-finite steps without fp16: skipped, counted, logged (JSONL "nan"/"inf" strings);
#      --max-skips stops the run with one error line and a non-zero exit, no checkpoint is
#      written from a diverged or non-finite model, the last good one stays the latest; a run
#      that ends on skipped steps exits non-zero with one line
#   5. bad flags; the GPU trainer's precision checks (the configuration code compiled by nvcc as
#      train_gpt compiles it, bf16 and fp16 builds: no GPU needed): one line naming the build to use
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
make_shard "$TMP/train.bin" 40000 250
M="--preset tiny --dim 32 --heads 2 --vocab 250 --seq 16 --batch 2 --train $TMP/train.bin --threads 1 --quiet 1"
export TMP
cfg() { echo "$2" > "$TMP/$1.json"; echo "$TMP/$1.json"; }

# run NAME NP STAGE ARGS...: a run's JSONL in $TMP/NAME.jsonl, its output in $TMP/NAME.out, its exit status in $TMP/NAME.rc
run() {
    local name=$1 np=$2 stage=$3; shift 3
    if [ "$np" -eq 1 ]; then timeout 300 ./build/z$stage/train_gpt_cpu $M "$@" --log "$TMP/$name.jsonl" > "$TMP/$name.out" 2>&1
    else timeout 300 $MPIRUN -np "$np" ./build/z$stage/train_gpt_cpu $M "$@" --log "$TMP/$name.jsonl" > "$TMP/$name.out" 2>&1; fi
    echo $? > "$TMP/$name.rc"
}

echo "== 1. the loss scale and the skipped steps of every step against DeepSpeed's scaler (tests/deepspeed_ref.py)"
# name | fp16 block | injected steps | world size, ZeRO stage, rank injected
cases=(
  "w3h2|{\"initial_scale_power\": 8, \"loss_scale_window\": 3, \"hysteresis\": 2, \"min_loss_scale\": 1}|2,3,4,8,9,13,14,15,16|1 0 0;3 3 1;3 1 2"
  "w2h1|{\"initial_scale_power\": 7, \"loss_scale_window\": 2, \"hysteresis\": 1, \"min_loss_scale\": 1}|1,3,4,5,9,10,11,12|1 0 0;3 2 2"
  "w4h3c|{\"initial_scale_power\": 9, \"loss_scale_window\": 4, \"hysteresis\": 3, \"consecutive_hysteresis\": true, \"min_loss_scale\": 0.25}|2,3,5,6,7,8,9,10,11,16|1 0 0;3 3 1"
  "atmin|{\"initial_scale_power\": 6, \"loss_scale_window\": 5, \"hysteresis\": 1, \"min_loss_scale\": 16}|2,3,5,6|3 3 2"
  "static|{\"loss_scale\": 64}|3,4,9|1 0 0"
)
for c in "${cases[@]}"; do
    IFS='|' read -r name block steps runs <<< "$c"
    path=$(cfg "$name" "{\"fp16\": $(echo "$block" | sed 's/^{/{"enabled": true, /')}")
    IFS=';' read -ra rs <<< "$runs"
    for r in "${rs[@]}"; do
        read -r np stage rank <<< "$r"
        spec=$(echo "$steps" | tr ',' '\n' | sed "s/\$/:$rank/" | paste -sd, -)
        run "${name}_${np}_${stage}" "$np" "$stage" --config "$path" --steps 18 --lr-schedule WarmupLR --warmup 10 \
            --warmup-type linear --lr 2e-3 --inject-nonfinite "$spec" --max-skips 0 --quiet 0
        $PY - "$TMP/${name}_${np}_${stage}" "$path" "$steps" "$np" "$stage" "$rank" <<'PYEOF'
import json, sys
sys.path.insert(0, "tests")
import numpy as np, deepspeed_ref as D
base, cfgpath, steps, np_, stage, rank = sys.argv[1:7]
fp = dict({"loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2,
           "consecutive_hysteresis": False, "min_loss_scale": 1}, **json.load(open(cfgpath))["fp16"])
inj = {int(s) for s in steps.split(",")}
rc = int(open(base + ".rc").read())
recs = [r for r in map(json.loads, open(base + ".jsonl")) if r["type"] == "train"]
if fp["loss_scale"] > 0: ref = D.StaticLossScaler(fp["loss_scale"])
else: ref = D.DynamicLossScaler(2.0 ** fp["initial_scale_power"], fp["loss_scale_window"], fp["min_loss_scale"],
                                fp["hysteresis"], fp["consecutive_hysteresis"])
sched = D.WarmupLR(0.0, float(np.float32(2e-3)), 10, "linear")
want, stop = [], None
for k in range(1, 19):
    scale, lr = ref.scale, sched.lr()
    try:
        ref.update_scale(k in inj)
    except D.LossScaleAtMinimum:
        stop = k
    want.append((k, scale, k in inj, float(np.float32(lr))))
    if stop: break
    if k not in inj: sched.step()
got = [(r["step"], r["loss_scale"], r["skipped"], float(np.float32(r["lr"]))) for r in recs]
out = open(base + ".out").read()
ok = got == want and all(r["skipped_steps"] == sum(1 for k in inj if k <= r["step"]) for r in recs)
ok = ok and all((r["skip_reason"] == "overflow") == r["skipped"] for r in recs if r["skipped"]) and all(np.isfinite(r["loss"]) for r in recs)
if stop:
    ok = ok and rc != 0 and "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run." in out
else:
    ok = ok and rc == 0 and len(recs) == 18
first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
if first is not None: print("       first difference at step %d: got %s, DeepSpeed %s" % (first + 1, got[first], want[first]))
print("  %s %-6s %d rank%s, ZeRO %s, Inf on rank %s at steps %s: scales %s%s; %d/%d steps equal%s" % (
    "ok  " if ok else "FAIL", base.split("/")[-1].split("_")[0], int(np_), "s" if np_ != "1" else "", stage, rank, steps,
    " ".join("%g%s" % (s, "*" if sk else "") for _, s, sk, _ in got[:14]), " ..." if len(got) > 14 else "",
    sum(g == w for g, w in zip(got, want)), len(want), ", stopped at step %d (scale at the minimum: DeepSpeed's error)" % stop if stop else ""))
sys.exit(0 if ok else 1)
PYEOF
        [ $? -eq 0 ] || fails=$((fails+1))
    done
done
echo "       (* = skipped)"
grep "^step    3/" "$TMP/w3h2_3_3.out" | sed 's/^/       /'
grep -q "^step    3/18 | .* | scale 256 | SKIPPED (overflow; 2 so far) |" "$TMP/w3h2_3_3.out"
check "the step line shows the scale and the skips (rank 0 prints, rank 1 overflowed)" $?
$PY - "$TMP" <<'PYEOF'
import json, sys
T = sys.argv[1]
loss = {s: [r["loss"] for r in map(json.loads, open("%s/w3h2_3_%d.jsonl" % (T, s))) if r["type"] == "train"] for s in (1, 3)}
d = max(abs(a - b) for a, b in zip(loss[1], loss[3]))
print("       ZeRO 1 and ZeRO 3 at 3 ranks, fp16, the same overflows (injected on ranks 2 and 1): max |loss diff| %.1e over %d steps" % (d, len(loss[1])))
sys.exit(0 if d < 2e-3 and all(len(l) == 18 for l in loss.values()) else 1)
PYEOF
check "the fp16 mode trains the same whatever the ZeRO stage and the rank that overflows" $?

echo "== 2. overflows of the fp16 range happen by themselves; fp16 training follows fp32"
run natural 3 2 --config "$(cfg nat '{"fp16": {"enabled": true, "initial_scale_power": 30, "loss_scale_window": 4, "hysteresis": 2}}')" \
    --steps 24 --lr 1e-2 --batch 4
$PY - "$TMP/natural" <<'PYEOF'
import json, sys
sys.path.insert(0, "tests")
import deepspeed_ref as D
base = sys.argv[1]
recs = [r for r in map(json.loads, open(base + ".jsonl")) if r["type"] == "train"]
ref = D.DynamicLossScaler(2.0 ** 30, 4, 1, 2, False)
want = []
for r in recs:
    want.append(ref.scale)
    ref.update_scale(r["skipped"])
got = [r["loss_scale"] for r in recs]
n_skip = sum(r["skipped"] for r in recs)
print("       scale 2^30 at 3 ranks, ZeRO 2: %d steps overflowed by themselves (%s); scales %s" % (
    n_skip, ", ".join(sorted({r.get("skip_reason", "") for r in recs if r["skipped"]})), " ".join("2^%d" % (s.bit_length() - 1) for s in map(int, got))))
ok = open(base + ".rc").read().strip() == "0" and got == want and n_skip >= 5
ok = ok and all(r.get("skip_reason") == "overflow" for r in recs if r["skipped"]) and recs[-1]["loss"] < recs[0]["loss"] - 0.05
sys.exit(0 if ok else 1)
PYEOF
check "a scale of 2^30 overflows fp16's range (65504): those steps are skipped and the scale comes down as DeepSpeed's does" $?
run f32 1 0 --steps 20 --lr 1e-2 --batch 8
run f16 1 0 --steps 20 --lr 1e-2 --batch 8 --fp16 1
$PY - "$TMP/f32.jsonl" "$TMP/f16.jsonl" <<'PYEOF'
import json, sys
a, b = ([r for r in map(json.loads, open(p)) if r["type"] == "train"] for p in sys.argv[1:3])
dn = abs(a[0]["grad_norm"] - b[0]["grad_norm"]) / a[0]["grad_norm"]
dl = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
print("       step 1 gradient norm fp32 %.6f, fp16 (unscaled from 2^16) %.6f: rel diff %.1e; max |loss diff| over 20 steps %.1e; "
      "fp16 loss %.4f -> %.4f" % (a[0]["grad_norm"], b[0]["grad_norm"], dn, dl, b[0]["loss"], b[-1]["loss"]))
ok = len(a) == len(b) == 20 and 0 < dn < 1e-3 and 0 < dl < 2e-2 and b[-1]["loss"] < b[0]["loss"] - 0.5
ok = ok and all(r["loss_scale"] == 65536 and not r["skipped"] for r in b) and "loss_scale" not in a[0]
sys.exit(0 if ok else 1)
PYEOF
check "fp16 (parameters and gradients rounded) vs fp32: the unscaled norm and the losses agree to fp16's precision, not bitwise" $?

echo "== 3. a skipped step changes nothing; an fp16 run resumes with its scaler"
ck_same() { cmp -s "$1/model.bin" "$2/model.bin" && for f in "$1"/optim_rank_*.bin; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done; }
# shuffled, sampling every 3 steps at temperature 1: the resume below restores what the random state drives too
RNG="--shuffle 1 --sample-every 3 --sample-len 4"
run full16 3 3 --config "$TMP/w3h2.json" --steps 12 --inject-nonfinite 2:1,3:1,4:1,9:2 --save "$TMP/r16" --save-every 1 --lr 1e-3 $RNG
run keep32 3 1 --steps 6 --inject-nonfinite 4:1:nan --save "$TMP/ck32" --save-every 1 --lr 1e-3
d="$TMP/r16"
[ "$(cat "$TMP/full16.rc")" = 0 ] && ck_same "$d/ckpt_00000008" "$d/ckpt_00000009" && ! ck_same "$d/ckpt_00000009" "$d/ckpt_00000010" &&
    ! cmp -s "$d/ckpt_00000007/model.bin" "$d/ckpt_00000008/model.bin"
check "fp16, ZeRO 3, 3 ranks: model.bin (the fp32 master) and every optim_rank file after skipped step 9 == after step 8 (bitwise); steps 8 and 10 change them" $?
d="$TMP/ck32"
[ "$(cat "$TMP/keep32.rc")" = 0 ] && ck_same "$d/ckpt_00000003" "$d/ckpt_00000004" && ! ck_same "$d/ckpt_00000004" "$d/ckpt_00000005" &&
    ! cmp -s "$d/ckpt_00000002/model.bin" "$d/ckpt_00000003/model.bin"
check "fp32, ZeRO 1, 3 ranks: the same around skipped step 4 (NaN)" $?
grep '"type":"train"' "$TMP/keep32.jsonl" | grep -o '"lr":[^,]*' | sed -n '4,5p' | uniq | wc -l | grep -qx 1
check "the learning rate of step 5 is step 4's (the schedule did not advance)" $?
run res16 3 3 --config "$TMP/w3h2.json" --steps 12 --inject-nonfinite 2:1,3:1,4:1,9:2 --resume "$TMP/r16/ckpt_00000006" --lr 1e-3 $RNG
$PY - "$TMP/full16.jsonl" "$TMP/res16.jsonl" "$TMP/r16/ckpt_00000006/manifest.json" <<'PYEOF'
import json, sys
key = lambda r: (r["step"], r["loss"], r["loss_scale"], r["skipped"], r["skipped_steps"], r["lr"], r["grad_norm"])
a, b = ([key(r) for r in map(json.loads, open(p)) if r["type"] == "train"] for p in sys.argv[1:3])
m = json.load(open(sys.argv[3]))
print("       manifest: skipped_steps %s, loss_scaler %s; resumed steps 7-12 %s" % (m["skipped_steps"], m["loss_scaler"],
      "identical" if a[6:] == b[-6:] else "DIFFER"))
sys.exit(0 if len(a) == 12 and len(b) >= 6 and a[6:] == b[-6:] and m["skipped_steps"] == 3 else 1)
PYEOF
check "fp16 resume (scale, hysteresis, skipped steps in the manifest): steps 7-12 bitwise identical to the unbroken run" $?
same_samples "$TMP/full16.jsonl" "$TMP/res16.jsonl"; check "... and the samples after the resume (shuffled data, temperature 1) are the unbroken run's" $?

echo "== 4. non-finite steps without fp16: --max-skips, no checkpoint from a diverged model"
run stop 3 2 --steps 10 --inject-nonfinite 5:2,6:2,7:1:nan,8:2 --max-skips 3 --save "$TMP/stop" --save-every 1 --lr 1e-3
n_err=$(grep -c "error: step 7: 3 consecutive steps skipped (non-finite gradients" "$TMP/stop.out")
[ "$(cat "$TMP/stop.rc")" != 0 ] && [ "$n_err" -ge 1 ] && [ "$(cat "$TMP/stop/latest")" = ckpt_00000006 ] && [ ! -e "$TMP/stop/ckpt_00000007" ] &&
    ck_same "$TMP/stop/ckpt_00000004" "$TMP/stop/ckpt_00000006"
st=$?; check "3 consecutive skips (rank 2 twice, then rank 1): every rank stops at step 7, exit $(cat "$TMP/stop.rc"), $n_err rank(s) printed the line" $st
grep -m1 "error: step 7" "$TMP/stop.out" | sed 's/^/       /'
$PY - "$TMP/stop.jsonl" <<'PYEOF'
import json, math, sys
lines = [l for l in open(sys.argv[1]) if '"type":"train"' in l]
recs = [json.loads(l) for l in lines]
bad = [r for r in recs if r["skipped"]]
print("       JSONL of a skipped step: %s" % lines[6].strip()[:160])
ok = [r["step"] for r in bad] == [5, 6, 7] and all(isinstance(r["grad_norm"], str) and not math.isfinite(float(r["grad_norm"])) for r in bad)
ok = ok and "null" not in "".join(lines) and [r["skipped_steps"] for r in recs] == [0, 0, 0, 0, 1, 2, 3]
ok = ok and all(r["skip_reason"] == "non-finite gradients" for r in bad) and {r["grad_norm"] for r in bad} == {"inf", "nan"}
sys.exit(0 if ok else 1)
PYEOF
check "the JSONL records say skipped, why, and how many; non-finite values as the strings \"inf\"/\"nan\", never null" $?
run noskip 1 0 --steps 7 --inject-nonfinite 2:0,3:0,4:0,5:0,6:0 --max-skips 0
[ "$(cat "$TMP/noskip.rc")" = 0 ] && [ "$(grep -c '"skipped":true' "$TMP/noskip.jsonl")" = 5 ]
check "--max-skips 0 never stops (5 consecutive skips, the run completes)" $?

run diverge 1 0 --steps 10 --lr 1e30 --max-skips 3 --save "$TMP/div" --save-every 1
$PY - "$TMP/div/$(cat "$TMP/div/latest" 2>/dev/null)/model.bin" <<'PYEOF'
import sys, numpy as np
w = np.fromfile(sys.argv[1], dtype=np.float32, offset=1024)
print("       --lr 1e30: latest %s, its %d parameters finite: %s" % (sys.argv[1].split("/")[-2], w.size, bool(np.isfinite(w).all())))
sys.exit(0 if np.isfinite(w).all() else 1)
PYEOF
ok=$?
[ $ok -eq 0 ] && [ "$(cat "$TMP/diverge.rc")" != 0 ] && [ "$(cat "$TMP/div/latest")" = ckpt_00000001 ] && [ ! -e "$TMP/div/ckpt_00000002" ] &&
    grep -q "error: step 4: 3 consecutive steps skipped (non-finite loss" "$TMP/diverge.out" &&
    grep -q "warning: step 2: no checkpoint written: the loss is not finite .*the latest checkpoint in .*div stays ckpt_00000001" "$TMP/diverge.out"
st=$?; check "a diverging learning rate: NaN loss from step 2, no checkpoint written from then on, stopped at step 4 (exit $(cat "$TMP/diverge.rc"))" $st

echo "== 4b. a run that ends on skipped steps exits non-zero and says so; the warnings name what is saved"
run tail 3 1 --steps 6 --inject-nonfinite 5:1,6:2 --max-skips 3 --save "$TMP/tail" --save-every 1 --lr 1e-3
grep -E "error" "$TMP/tail.out" | sort -u | sed 's/^/       /'
[ "$(cat "$TMP/tail.rc")" = 1 ] && grep -q "error: the run ended on 2 skipped steps (steps 5-6, non-finite gradients): its parameters are those of step 4, the last applied one; the latest checkpoint, .*tail/ckpt_00000006, holds them" "$TMP/tail.out"
st=$?; check "the last 2 of 6 steps skipped (3 ranks): exit 1 (got $(cat "$TMP/tail.rc")) and one line saying so" $st
run nanend 1 0 --steps 4 --lr 1e30 --max-skips 0 --save "$TMP/nanend"
grep -E "error|warning" "$TMP/nanend.out" | sed 's/^/       /'
[ "$(cat "$TMP/nanend.rc")" = 1 ] && grep -q "warning: step 4: no checkpoint written: the loss is not finite .*there is no checkpoint in .*nanend" "$TMP/nanend.out" &&
    grep -q "error: the run ended on 3 skipped steps (steps 2-4, non-finite loss): its parameters are those of step 1, the last applied one; no checkpoint holds them" "$TMP/nanend.out"
check "a NaN loss from step 2 to the end (--max-skips 0): exit 1, and no warning names a checkpoint that does not exist" $?

./build/z0/train_gpt_cpu $M --steps 2 --save "$TMP/good" > /dev/null 2>&1
$PY - "$TMP/good/ckpt_00000002/model.bin" "$TMP/poison.bin" <<'PYEOF'
import sys, numpy as np
b = bytearray(open(sys.argv[1], "rb").read())
np.frombuffer(b, dtype=np.float32, offset=1024)[777] = np.nan
open(sys.argv[2], "wb").write(b)
PYEOF
run poison0 3 3 --init "$TMP/poison.bin" --steps 0 --save "$TMP/good"
grep -q "error: .*poison.bin: tensor embed.wte: non-finite value at element 777" "$TMP/poison0.out" &&
    [ "$(cat "$TMP/poison0.rc")" != 0 ] && [ "$(cat "$TMP/good/latest")" = ckpt_00000002 ] && [ ! -e "$TMP/good/ckpt_00000000" ] &&
    ! ls -a "$TMP/good" | grep -q tmp
st=$?; check "a model file with a NaN parameter is refused at --init, the tensor named (ZeRO 3, 3 ranks): exit $(cat "$TMP/poison0.rc"), nothing saved" $st
grep -m1 "error: " "$TMP/poison0.out" | sed 's/^/       /'
run overflow 3 3 --steps 2 --lr 3.4e38 --lr-schedule constant --save "$TMP/ovf" --save-every 1
grep -q "error: step 1: not saving a checkpoint to .*ovf: the fp32 master weights hold -\?inf" "$TMP/overflow.out" &&
    [ "$(cat "$TMP/overflow.rc")" != 0 ] && [ -z "$(ls -A "$TMP/ovf" | grep -v '^.lock$')" ]
st=$?; check "master weights that overflow to Inf in an applied step (--lr 3.4e38, finite loss) are never saved (ZeRO 3, 3 ranks): exit $(cat "$TMP/overflow.rc")" $st
grep -m1 "error: step 1" "$TMP/overflow.out" | sed 's/^/       /'
# the same divergence on the last step, with and without --save: the same exit status, each with one line
run ovfsave 1 0 --steps 1 --lr 3.4e38 --warmup 0 --save "$TMP/ovfsave"
run ovfnosave 1 0 --steps 1 --lr 3.4e38 --warmup 0
[ "$(cat "$TMP/ovfsave.rc")" = 1 ] && [ "$(cat "$TMP/ovfnosave.rc")" = 1 ] && [ "$(grep -c "^error: " "$TMP/ovfnosave.out")" = 1 ] &&
    grep -q "error: step 1: the run ended with parameters that are not finite: the fp32 master weights hold -\?inf" "$TMP/ovfnosave.out"
st=$?; check "Inf weights after the last step: exit $(cat "$TMP/ovfsave.rc") with --save, $(cat "$TMP/ovfnosave.rc") without" $st
grep -m1 "error: " "$TMP/ovfnosave.out" | sed 's/^/       /'
run ovfskip 1 0 --steps 2 --lr 3.4e38 --lr-schedule constant
[ "$(cat "$TMP/ovfskip.rc")" = 1 ] &&
    grep -q "error: the run ended on 1 skipped step (step 2, non-finite loss): its parameters are those of step 1, the last applied one, and they are not finite: the fp32 master weights hold" "$TMP/ovfskip.out"
check "a skipped last step after Inf weights: the line says the last applied step's parameters are not finite" $?
run poison16 1 0 --steps 10 --fp16 1 --lr 1e30 --max-skips 4
[ "$(cat "$TMP/poison16.rc")" != 0 ] && grep -q "error: step 5: 4 consecutive steps skipped (non-finite loss" "$TMP/poison16.out"
check "fp16: a NaN loss (--lr 1e30 from step 2) counts toward --max-skips, the scaler cannot fix it: stopped at step 5" $?

echo "== 5. bad flags; a precision the GPU build does not train"
T0="./build/z0/train_gpt_cpu $M --steps 1"
expect_error "--inject-nonfinite without a rank" "--inject-nonfinite: expected STEP:RANK\[:inf\|nan\]\[,...\] with STEP >= 1 and RANK in \[0, 1\), got '3'" 1 $T0 --inject-nonfinite 3
expect_error "--inject-nonfinite: a rank the run does not have (every rank says so)" "--inject-nonfinite: .*RANK in \[0, 3\), got '2:1,4:3'" 1 \
    $MPIRUN -np 3 $T0 --inject-nonfinite 2:1,4:3
expect_error "--inject-nonfinite: neither inf nor nan" "--inject-nonfinite: .*got '2:0:zero'" 1 $T0 --inject-nonfinite 2:0:zero
expect_error "--max-skips -1" "--max-skips: expected an integer in \[0, 1073741824\], got '-1'" 1 $T0 --max-skips -1
expect_error "--fp16 2" "--fp16: expected an integer in \[0, 1\], got '2'" 1 $T0 --fp16 2
expect_error "fp16 with bf16 (DeepSpeed's rule)" "--fp16: bfloat16 and fp16 modes cannot be simultaneously enabled" 1 \
    $T0 --fp16 1 --config "$(cfg b16 '{"bf16": {"enabled": true}}')"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$NVCC" ] || command -v "$NVCC" > /dev/null 2>&1; then
    make -s -j2 build/config_test_gpu build/config_test_gpu_fp16 NVCC="$NVCC" || exit 1
    F16=$(cfg f16 '{"fp16": {"enabled": true}}')
    expect_error "fp16.enabled on train_gpt's bf16 build" 'f16.json: fp16.enabled: true: this train_gpt trains in bf16; fp16 training needs the fp16 build \(make train_gpt FP16=1\)' 1 \
        ./build/config_test_gpu lr --config "$F16"
    expect_error "--fp16 0 on the fp16 build" '--fp16: false: this train_gpt is the fp16 build \(make train_gpt FP16=1\); bf16 training needs the default build' 1 \
        ./build/config_test_gpu_fp16 lr --fp16 0
    expect_error "bf16.enabled on the fp16 build" 'b16.json: bf16.enabled: true: this train_gpt is the fp16 build' 1 \
        ./build/config_test_gpu_fp16 lr --config "$TMP/b16.json"
    ./build/config_test_gpu_fp16 resolved --config "$F16" | grep -q '"precision":"fp16"' &&
        ./build/config_test_gpu resolved | grep -q '"precision":"bf16"' && ./build/config_test_gpu_fp16 resolved | grep -q '"precision":"fp16"'
    check "the fp16 build trains fp16 by default and with fp16.enabled, the default build bf16 (the resolved configuration)" $?
else
    echo "  (no nvcc: the GPU build's precision checks skipped)"
fi
[ $fails -eq 0 ]
