#!/usr/bin/env bash
# DeepSpeed configs as users write them (config/*.h, config/ds_config.h, train/loss_scaler.h):
#   1. docs/config.md's table of keys is the code's table (--config-keys)
#   2. DeepSpeed's schedules: zeroc's lr at every step equals tests/deepspeed_ref.py (flags and config)
#   3. DeepSpeed's loss scaler: the scale, hysteresis and skips over overflow sequences equal the reference
#   4. DeepSpeed's batch rules: derivations and errors equal the reference
#   5. every misuse gives its one-line error (all errors of a file in one run) or note
#   6. the issue's example config trains as given at 4 ranks (ZeRO-3) with fp16 on (the CPU trainer's
#      fp16 mode: DeepSpeed's loss scaling, the scale sequence as DeepSpeed's scaler gives it);
#      a config with "auto" in every field trains exactly as no config does
#   7. optimizer.type Adam with adam_w_mode false (L2) agrees with torch.optim.Adam in the PyTorch reference
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/config_test build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu || exit 1
CT=./build/config_test
export TMP

echo "== 1. docs/config.md's key table is the table of config/ds_config.h"
$CT lr --config-keys > "$TMP/keys.md"
awk '/<!-- config-keys -->/{on=1; next} /<!-- \/config-keys -->/{on=0} on' docs/config.md > "$TMP/doc_keys.md"
rows=$(grep -c '^| `' "$TMP/keys.md")
if cmp -s "$TMP/keys.md" "$TMP/doc_keys.md"; then
    echo "  ok   docs/config.md lists the same $rows keys as --config-keys"
    printf '       %s keys: %s honoured, %s no effect, %s unsupported\n' "$rows" \
        "$(grep -c '| honoured |' "$TMP/keys.md")" "$(grep -c '| no effect |' "$TMP/keys.md")" \
        "$(grep -c '| unsupported |' "$TMP/keys.md")"
else
    echo "  FAIL docs/config.md's key table differs from the code (regenerate: make docs-config-keys)"
    diff "$TMP/keys.md" "$TMP/doc_keys.md" | head -10 | sed 's/^/       /'
    fails=$((fails+1))
fi

echo "== 2-4. schedules, loss scaler and batch rules against tests/deepspeed_ref.py"
$PY - <<'PYEOF'
import json, os, subprocess, sys
import numpy as np
sys.path.insert(0, "tests")
import deepspeed_ref as D

TMP, CT = os.environ["TMP"], "./build/config_test"
fails = 0


def check(ok, what):
    global fails
    print(("  ok   " if ok else "  FAIL ") + what)
    fails += 0 if ok else 1


def run(args):
    p = subprocess.run([CT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def config_file(name, obj):
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


f32 = lambda x: float(np.float32(x))   # zeroc holds every setting as float32

# --- 2. schedules: (name, flags or config, steps, the reference scheduler from the float32 settings)
sched_cases = [
    ("WarmupLR log W=10 (flags)", ["--lr-schedule", "WarmupLR", "--warmup", "10", "--lr", "3e-4"], 40,
     lambda: D.WarmupLR(0.0, f32(3e-4), 10, "log")),
    ("WarmupLR linear W=7 min 1e-5 (flags)", ["--lr-schedule", "WarmupLR", "--warmup", "7", "--warmup-type", "linear",
                                              "--warmup-min-lr", "1e-5", "--lr", "1e-3"], 30,
     lambda: D.WarmupLR(f32(1e-5), f32(1e-3), 7, "linear")),
    ("WarmupLR W=0 -> 2 (flags)", ["--lr-schedule", "WarmupLR", "--lr", "1e-3"], 6, lambda: D.WarmupLR(0.0, f32(1e-3), 0, "log")),
    ("WarmupLR log W=1000 over 1200 steps (config)", {"scheduler": {"type": "WarmupLR", "params": {
        "warmup_min_lr": 0, "warmup_max_lr": 3e-4, "warmup_num_steps": 1000}}}, 1200,
     lambda: D.WarmupLR(0.0, f32(3e-4), 1000, "log")),
    ("WarmupDecayLR log W=10 T=50 min 1e-5, 60 steps (config)", {"scheduler": {"type": "WarmupDecayLR", "params": {
        "warmup_min_lr": 1e-5, "warmup_max_lr": 6e-4, "warmup_num_steps": 10, "total_num_steps": 50}}}, 60,
     lambda: D.WarmupDecayLR(50, f32(1e-5), f32(6e-4), 10, "log")),
    ("WarmupDecayLR linear W=5 over --steps 25 (flags)", ["--lr-schedule", "WarmupDecayLR", "--warmup", "5", "--warmup-type",
                                                          "linear", "--warmup-min-lr", "2e-5", "--lr", "5e-4"], 25,
     lambda: D.WarmupDecayLR(25, f32(2e-5), f32(5e-4), 5, "linear")),
    ("WarmupCosineLR log W=10 T=50 ratios 0.1/1e-4 (config)", {"optimizer": {"type": "AdamW", "params": {"lr": 6e-4}},
        "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 50, "warmup_min_ratio": 0.1,
                                                         "warmup_num_steps": 10}}}, 55,
     lambda: D.WarmupCosineLR(f32(6e-4), 50, f32(0.1), 10, f32(1e-4), "log")),
    ("WarmupCosineLR linear W=8 over --steps 30, cos_min_ratio 0.05 (flags)",
     ["--lr-schedule", "WarmupCosineLR", "--warmup", "8", "--warmup-type", "linear", "--cos-min-ratio", "0.05", "--lr", "1e-3"], 30,
     lambda: D.WarmupCosineLR(f32(1e-3), 30, 0.0, 8, f32(0.05), "linear")),
]
for name, how, steps, ref in sched_cases:
    args = list(how) if isinstance(how, list) else ["--config", config_file("sched", how)]
    rc, out, err = run(["lr"] + args + ["--steps", str(steps)])
    got = [float(l.split()[1]) for l in out.split("\n") if l]
    want = D.engine_lrs(ref(), steps)
    equal = sum(np.float32(a) == np.float32(b) for a, b in zip(got, want))
    diff = max((abs(a - b) for a, b in zip(got, want)), default=float("nan"))
    check(rc == 0 and len(got) == steps and equal == steps,
          "%s: %d/%d steps bitwise equal (max |diff| %.1e); lr %s" % (name, equal, steps, diff, " ".join("%.3g" % x for x in got[:5]) + " ..."))

# --- 3. loss scaler: settings x overflow sequences, every step's verdict, scale and hysteresis
rng = np.random.default_rng(12)
seqs = ["0000011000100000001111111100000000000001",
        "".join("1" if x < 0.3 else "0" for x in rng.random(80)),
        "".join("1" if x < 0.6 else "0" for x in rng.random(60)),
        "0101010101010100000000000011111111111111111111111111111111"]
settings = [  # fp16 block
    {"loss_scale": 0, "initial_scale_power": 5, "loss_scale_window": 3, "hysteresis": 2, "min_loss_scale": 1},
    {"loss_scale": 0, "initial_scale_power": 4, "loss_scale_window": 2, "hysteresis": 1, "min_loss_scale": 1},
    {"loss_scale": 0, "initial_scale_power": 6, "loss_scale_window": 4, "hysteresis": 3, "min_loss_scale": 0.25},
    {"loss_scale": 0, "initial_scale_power": 8, "loss_scale_window": 5, "hysteresis": 2, "consecutive_hysteresis": True, "min_loss_scale": 4},
    {"loss_scale": 0, "initial_scale_power": 3, "loss_scale_window": 1, "hysteresis": 1, "min_loss_scale": 2},
    # a minimum no halving of 2^p lands on: the scale must stop at it, not below
    {"loss_scale": 0, "initial_scale_power": 4, "loss_scale_window": 3, "hysteresis": 1, "min_loss_scale": 3},
    {"loss_scale": 128},
]
for st in settings:
    path = config_file("fp16", {"fp16": dict(st, enabled=True)})
    fp = dict({"initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "consecutive_hysteresis": False,
               "min_loss_scale": 1}, **st)
    total = same = stops = 0
    for seq in seqs:
        rc, out, err = run(["scaler", seq, "--config", path])
        lines = [l.split() for l in out.split("\n") if l and not l.startswith("skipped")]
        if st["loss_scale"] > 0:
            ref = D.StaticLossScaler(st["loss_scale"])
        else:
            ref = D.DynamicLossScaler(2 ** fp["initial_scale_power"], fp["loss_scale_window"], fp["min_loss_scale"],
                                      fp["hysteresis"], fp["consecutive_hysteresis"])
        want, skipped = [], 0
        for i, ch in enumerate(seq):
            try:
                ref.update_scale(ch == "1")
            except D.LossScaleAtMinimum:
                want.append((i + 1, 2, ref.scale, ref.hysteresis))
                break
            skipped += ch == "1"
            want.append((i + 1, int(ch == "1"), ref.scale, ref.hysteresis))
        got = [(int(a), int(c), float(d), int(e)) for a, b, c, d, e in lines]
        if st["loss_scale"] > 0:   # a static scaler has no hysteresis
            got = [(a, b, c, 0) for a, b, c, _ in got]
        total += len(want)
        same += sum(g == w for g, w in zip(got, want)) if len(got) == len(want) else 0
        stops += bool(want and want[-1][1] == 2)
        if got != want or rc != 0:
            print("       %s seq %s: first difference at %s" % (st, seq, next(((g, w) for g, w in zip(got, want) if g != w), (len(got), len(want)))))
    label = "static %g" % st["loss_scale"] if st["loss_scale"] > 0 else \
        "2^%d, window %d, hysteresis %d%s, min %g" % (fp["initial_scale_power"], fp["loss_scale_window"], fp["hysteresis"],
                                                      " consecutive" if fp["consecutive_hysteresis"] else "", fp["min_loss_scale"])
    check(same == total, "loss scaler %s: %d/%d steps of %d sequences equal (scale, hysteresis, skip)%s"
          % (label, same, total, len(seqs), ", %d stopped at the minimum scale as DeepSpeed does" % stops if stops else ""))

# --- 4. batch rules: (train_batch_size, micro, accumulation, world), given as flags or config keys
batch_cases = [(32, 4, 2, 4), (32, 4, None, 4), (32, None, 2, 4), (None, 4, 2, 4), (32, None, None, 4), (None, 4, None, 4),
               (30, None, 5, 3), (12, 3, None, 2), (32, 4, 3, 4), (10, 2, None, 3), (2, 4, None, 1), (3, None, None, 4),
               (33, 4, None, 4)]
ok, n = 0, 0
for i, (tb, mb, ga, w) in enumerate(batch_cases):
    for via in ("flags", "config"):
        if via == "flags":
            args = sum(([f, str(v)] for f, v in (("--total-batch", tb), ("--batch", mb), ("--accum", ga)) if v is not None), [])
        else:
            keys = {"train_batch_size": tb, "train_micro_batch_size_per_gpu": mb, "gradient_accumulation_steps": ga}
            args = ["--config", config_file("batch", {k: v for k, v in keys.items() if v is not None})]
        rc, out, err = run(["batch", str(w)] + args)
        try:
            want = D.batch(tb, mb, ga, w)
        except AssertionError as e:
            want = str(e)
        if isinstance(want, tuple):
            good = rc == 0 and tuple(int(x) for x in out.split()) == want
        else:
            good = rc == 1 and err.count("\n") == 1 and want in err
        n += 1
        ok += good
        if not good or (i in (1, 8) and via == "flags"):
            print("       %s (tb %s, micro %s, accum %s, world %d): %s" % (via, tb, mb, ga, w, (out or err).strip()))
check(ok == n, "batch rules: %d/%d cases (flags and config keys) derive or refuse exactly as DeepSpeed" % (ok, n))
rc, out, _ = run(["batch", "3"])
rc2, out2, _ = run(["batch", "2", "--accum", "3"])
check(out.split() == ["4", "1", "12"] and out2.split() == ["4", "3", "24"],
      "neither total nor micro batch given: zeroc's default micro batch 4 (%s / %s)" % (out.strip(), out2.strip()))
sys.exit(1 if fails else 0)
PYEOF
[ $? -eq 0 ] || fails=$((fails+1))

echo "== 5. misuse: one line each, naming the key or flag"
cfg() { echo "$2" > "$TMP/$1.json"; echo "$TMP/$1.json"; }
E=$(cfg errors '{"train_micro_batch_size_per_gpu": 0, "zero_optimization": {"stage": 3.7, "stage3_max_live_parameter": 1e9,
  "offload_optimizer": {"device": "nvme"}}, "optimizer": {"type": "SGD", "params": {"lr": 1e-3, "betas": ["a", "b"]}},
  "fp16": {"enabled": true}, "bf16": {"enabled": true}, "trian_batch_size": 8}')
timeout 60 $CT lr --config "$E" > "$TMP/errs.txt" 2>&1
rc=$?
sed 's/^/       /' "$TMP/errs.txt"
n=$(grep -c "^error: " "$TMP/errs.txt")
for key in train_micro_batch_size_per_gpu zero_optimization.stage zero_optimization.stage3_max_live_parameter \
           zero_optimization.offload_optimizer.device optimizer.type optimizer.params.betas fp16.enabled; do
    grep -q "^error: .*errors.json: $key: " "$TMP/errs.txt" || { echo "  FAIL no error naming $key"; fails=$((fails+1)); }
done
[ $rc -eq 1 ] && [ "$n" -eq 8 ] && grep -q "^error: .*trian_batch_size: unknown top-level key (did you mean \"train_batch_size\"?)" "$TMP/errs.txt"
check "one run reports all 8 errors of a file, a misspelt top-level key's among them, each naming its key path" $?
grep -q 'stage3_max_live_parameter: unknown key (did you mean "stage3_max_live_parameters"?)' "$TMP/errs.txt" &&
grep -q 'stage: expected an integer in \[0, 3\], got 3.7' "$TMP/errs.txt" &&
grep -q 'offload_optimizer.device: "nvme" needs nvme_path: the directory of each rank.s file' "$TMP/errs.txt" &&
grep -q 'train_micro_batch_size_per_gpu: expected an integer in \[1, 1048576\], got 0' "$TMP/errs.txt"
check "misspelt zero_optimization key: did you mean; stage 3.7, micro batch 0 and nvme without nvme_path: the range, the supported values, the missing key" $?

expect_error "optimizer.params: unknown argument" 'optimizer.params.weight_decy: unknown key \(did you mean "weight_decay"\?\)' 1 \
    $CT lr --config "$(cfg c1 '{"optimizer": {"type": "Adam", "params": {"weight_decy": 0.1}}}')"
expect_error "scheduler type not implemented" 'scheduler.type: "OneCycle" is not supported' 1 \
    $CT lr --config "$(cfg c2 '{"scheduler": {"type": "OneCycle", "params": {}}}')"
expect_error "a schedule parameter the schedule does not take" 'scheduler.params.total_num_steps: not used by the WarmupLR schedule' 1 \
    $CT lr --config "$(cfg c3 '{"scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 100}}}')"
expect_error "max_grad_norm (DeepSpeed refuses it too)" 'optimizer.params.max_grad_norm: not supported: .*gradient_clipping' 1 \
    $CT lr --config "$(cfg c4 '{"optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1.0}}}')"
expect_error "amsgrad" 'optimizer.params.amsgrad: AMSGrad is not implemented' 1 \
    $CT lr --config "$(cfg c5 '{"optimizer": {"type": "Adam", "params": {"amsgrad": true}}}')"
expect_error "offload_param nvme below stage 3" 'zero_optimization.offload_param.device: parameter offload needs ZeRO stage 3' 1 \
    $CT lr --config "$(cfg c6 '{"zero_optimization": {"offload_param": {"device": "nvme", "nvme_path": "'$TMP'"}}}')"
expect_error "offload_optimizer nvme_path that is no directory" 'offload_optimizer.nvme_path: /nonexistent/nvme: No such file or directory' 1 \
    $CT lr --config "$(cfg c6b '{"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "/nonexistent/nvme"}}}')"
expect_error "Twin-Flow's ratio out of range" 'offload_optimizer.ratio: expected a number in \[0, 1\], got 1.5' 1 \
    $CT lr --config "$(cfg c7 '{"zero_optimization": {"offload_optimizer": {"device": "cpu", "ratio": 1.5}}}')"
expect_error "duplicate key" 'gradient_clipping: duplicate key' 1 $CT lr --config "$(cfg c8 '{"gradient_clipping": 1, "gradient_clipping": 2}')"
expect_error "deprecated cpu_offload" 'cpu_offload: not supported: deprecated in DeepSpeed' 1 \
    $CT lr --config "$(cfg c9 '{"zero_optimization": {"cpu_offload": true}}')"
expect_error "warmup_type typo" 'warmup_type: "lienar" is not supported \(supported: "linear", "log"\)' 1 \
    $CT lr --config "$(cfg c10 '{"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "lienar"}}}')"
expect_error "amp" 'amp: not supported: Apex AMP' 1 $CT lr --config "$(cfg c11 '{"amp": {"enabled": true, "opt_level": "O1"}}')"
# DeepSpeed's own top-level keys are no typos: a note where nothing changes, an error where DeepSpeed trains otherwise
$CT lr --config "$(cfg c11b '{"zero_force_ds_cpu_optimizer": false, "flops_profiler": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}}')" > "$TMP/c11b.out" 2>&1
[ $? -eq 0 ] && ! grep -q "unknown top-level" "$TMP/c11b.out" && [ "$(grep -c '^note: .*c11b.json: [a-z_]*: no effect here: ' "$TMP/c11b.out")" -eq 3 ]
check "DeepSpeed's zero_force_ds_cpu_optimizer, flops_profiler, data_types: a note each, not \"unknown top-level key\"" $?
# an optimizer block without betas and weight_decay: zeroc's defaults, not FusedAdam's, and a note says so (not for a flag's)
$CT lr --config "$(cfg c11d '{"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}')" --beta2 0.99 > "$TMP/c11d.out" 2>&1
grep -q "^note: .*c11d.json: optimizer.params: weight_decay absent: zeroc trains with 0.1, DeepSpeed's Adam/AdamW (FusedAdam, CPU-Adam) with 0: give weight_decay" "$TMP/c11d.out"
grep -q "^note: .*c11d.json: gradient_clipping: absent: zeroc clips the gradient norm at 1, DeepSpeed does not clip" "$TMP/c11d.out"
check "optimizer block without weight_decay (betas given by --beta2): a note with zeroc's 0.1 and DeepSpeed's 0; gradient_clipping absent: a note" $?
expect_error "elasticity (DeepSpeed would pick the batch)" 'elasticity: not supported: DeepSpeed would choose the batch size' 1 \
    $CT lr --config "$(cfg c11c '{"elasticity": {"enabled": true, "max_train_batch_size": 64}}')"
expect_error "fp16 and bf16 together" 'bfloat16 and fp16 modes cannot be simultaneously enabled' 1 \
    $CT lr --config "$(cfg c12 '{"fp16": {"enabled": true}, "bf16": {"enabled": true}}')"
expect_error "fp16 value out of range" 'fp16.hysteresis: expected an integer in \[1, 1073741824\], got 0' 1 \
    $CT lr --config "$(cfg c13 '{"fp16": {"enabled": true, "hysteresis": 0}}')"
expect_error "stage against the build (every rank says it)" 'zero_optimization.stage: asks for ZeRO stage 2 but this binary was built with ZERO=3' 1 \
    $MPIRUN -np 2 ./build/z3/train_gpt_cpu --config "$(cfg c14 '{"zero_optimization": {"stage": 2}}')"
./build/z3/train_gpt_cpu --config "$(cfg c16 '{"zero_optimization": {"offload_optimizer": {"device": "cpu", "ratio": 0.5}}}')" --steps 0 > "$TMP/c16.out" 2>&1
grep -q "^note: .*c16.json: zero_optimization.offload_optimizer.ratio: 0.5 splits nothing here" "$TMP/c16.out"
check "a note printed after the plan names the config file beside its key, as the config's own notes do" $?
./build/z2/train_gpt_cpu --config "$(cfg c15 '{"zero_optimization": {"stage": 2, "overlap_comm": false}}')" --steps 0 > "$TMP/c15.out" 2>&1
grep -q "overlap_comm: false: stage 2 always reduces each unit's gradient in the backward" "$TMP/c15.out"
check "overlap_comm at stage 2: a note that the reductions are in the backward anyway" $?
# stages 0-1: overlap_comm false starts every unit's reduction at the boundary (--overlap-reduce 0), none in the backward
for v in false true; do
    ./build/z1/train_gpt_cpu --config "$(cfg c15$v '{"zero_optimization": {"stage": 1, "overlap_comm": '$v'}}')" --steps 1 --quiet 1 \
        --log "$TMP/c15$v.jsonl" > "$TMP/c15$v.out" 2>&1
done
"$PY" - "$TMP/c15false.jsonl" "$TMP/c15true.jsonl" <<'PYEOF'
import json, sys
c = [[r for r in map(json.loads, open(p)) if r.get("type") == "comm"][-1] for p in sys.argv[1:]]
print(f"       overlap_comm false: {c[0]['reduced_in_backward']} of {c[0]['units']} units reduced in the backward; true: {c[1]['reduced_in_backward']}")
sys.exit(0 if c[0]["reduced_in_backward"] == 0 and c[1]["reduced_in_backward"] == c[1]["units"] > 0 else 1)
PYEOF
check "overlap_comm at stage 1: false reduces at the boundary, true in the backward" $?
for f in "--min-lr-frac -2" "--eps -1e-8" "--eps 0" "--clip -1" "--weight-decay -5" "--lr -1" "--beta1 1" "--beta2 -0.1" \
         "--warmup-min-lr -1" "--warmup-min-ratio 1.5" "--cos-min-ratio -0.1" "--batch 0" "--total-batch 0" "--accum 0" \
         "--warmup -1" "--adam-w-mode 2"; do
    set -- $f
    expect_error "flag range $f" "$1: expected " 1 $CT lr $f
done
expect_error "a flag the schedule does not take" '--warmup-min-lr: not used by the cosine schedule' 1 $CT lr --warmup-min-lr 1e-5
expect_error "--warmup-type with the cosine schedule" '--warmup-type: not used by the cosine schedule' 1 $CT lr --warmup-type linear
expect_note "adam_w_mode false with type AdamW" 'adam_w_mode: false has no effect with optimizer.type "AdamW"' \
    $CT lr --config "$(cfg n1 '{"optimizer": {"type": "AdamW", "params": {"adam_w_mode": false}}}')"
expect_note "a key with no effect" 'zero_optimization.contiguous_gradients: no effect here: gradients are always contiguous' \
    $CT lr --config "$(cfg n2 '{"zero_optimization": {"contiguous_gradients": true}}')"
expect_note "a monitor zeroc does not write" 'comet.enabled: no effect here: zeroc logs every step to --log FILE' \
    $CT lr --config "$(cfg n3 '{"comet": {"enabled": true, "project": "p"}}')"
expect_note "the wandb block does nothing, and names the upload of the tensorboard block's files" \
    'wandb: no effect here: zeroc does not call W&B; the tensorboard block.s event files in tb/DeepSpeedJobName upload with: wandb sync --sync-tensorboard -p p tb/DeepSpeedJobName' \
    $CT lr --config "$(cfg n3w '{"wandb": {"enabled": true, "project": "p"}, "tensorboard": {"enabled": true, "output_path": "tb"}}')"
expect_note "the wandb block without the tensorboard block: nothing is written for W&B" \
    'wandb: no effect here: zeroc does not call W&B and the tensorboard block is off, so nothing is written' \
    $CT lr --config "$(cfg n3x '{"wandb": {"enabled": true}, "tensorboard": {"enabled": false}}')"
expect_error "--init with --resume: one line, not a silently ignored --init" "--init: a.bin and --resume ck both give the model: a resume takes it from the checkpoint" 1 \
    $CT lr --init a.bin --resume ck
expect_note "activation checkpointing" 'activation_checkpointing.partition_activations: no effect here: partitions checkpoints across model-parallel ranks' \
    $CT lr --config "$(cfg n4 '{"activation_checkpointing": {"partition_activations": true, "number_checkpoints": null}}')"
expect_error "activation_checkpointing.number_checkpoints other than the layers" 'number_checkpoints: 3: zeroc checkpoints every layer' 1 \
    $CT lr --config "$(cfg e_nc '{"activation_checkpointing": {"number_checkpoints": 3}}')"
expect_error "--cpu-checkpointing without --recompute" '--cpu-checkpointing: offloads the checkpoints of activation checkpointing: it needs --recompute 1' 1 \
    $CT lr --cpu-checkpointing 1
expect_note "bf16 on the CPU trainer" 'bf16.enabled: true: the CPU trainer trains in fp32' $CT lr --config "$(cfg n5 '{"bf16": {"enabled": true}}')"
expect_note "--offload on the CPU trainer" "--offload: \"cpu\": the CPU trainer's optimizer state is in host memory already" $CT lr --offload 1
expect_note "warmup_max_lr replaces the optimizer's lr" 'optimizer.params.lr: 0.001 is replaced by scheduler.params.warmup_max_lr 0.0003' \
    $CT lr --config "$(cfg n6 '{"optimizer": {"params": {"lr": 1e-3}}, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-4}}}')"
$CT lr --config "$(cfg q1 '{"tensorboard": {"enabled": false, "output_path": "tb/"}, "wall_clock_breakdown": false, "fp16": {"enabled": false}}')" \
    > /dev/null 2> "$TMP/quiet.txt"
[ $? -eq 0 ] && [ ! -s "$TMP/quiet.txt" ]; check "keys that ask for nothing (disabled blocks, false) say nothing" $?

echo "== 6. the issue's example config trains as given (4 ranks, ZeRO-3, fp16 on); \"auto\" everywhere == no config"
make_shard "$TMP/train.bin" 40000 250
M="--preset tiny --vocab 250 --seq 32 --train $TMP/train.bin --threads 1"
cat > "$TMP/example.json" <<'EOF'
{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true}, "offload_param": {"device": "cpu", "pin_memory": true},
   "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
   "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
   "stage3_gather_16bit_weights_on_model_save": true},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
 "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-4, "warmup_num_steps": 1000}},
 "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
 "wall_clock_breakdown": false}
EOF
timeout 300 $MPIRUN -np 4 ./build/z3/train_gpt_cpu $M --config "$TMP/example.json" --steps 6 --log "$TMP/example.jsonl" > "$TMP/example.out" 2>&1
rc=$?
grep -E "^(note|warning|error)|^configuration|^  [a-z_0-9]+[: ]|^step" "$TMP/example.out" | sed 's/^/       /'
$PY - "$TMP/example.jsonl" $rc <<'PYEOF'
import json, sys
sys.path.insert(0, "tests")
import numpy as np, deepspeed_ref as D
recs = [json.loads(l) for l in open(sys.argv[1])] if sys.argv[2] == "0" else []
cfg = [r for r in recs if r["type"] == "config"]
tr = [r for r in recs if r["type"] == "train"]
ok = len(cfg) == 1 and len(tr) == 6 and all(np.isfinite(r["loss"]) for r in tr)
c = cfg[0] if cfg else {}
ok = ok and (c["train_batch_size"], c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"], c["world_size"]) == (32, 4, 2, 4)
ok = ok and c["zero_optimization"]["stage"] == 3 and c["fp16"]["enabled"] and c["precision"] == "fp16" and not c["bf16"]["enabled"]
ok = ok and c["auto"] == ["zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size",
                          "zero_optimization.stage3_param_persistence_threshold"]
# DeepSpeed's scaler from 2^16 (window 1000, hysteresis 2, min 1) over the run's own overflows, and
# WarmupLR stepped after applied steps only
scaler, sched = D.DynamicLossScaler(2.0 ** 16, 1000, 1, 2, False), D.WarmupLR(0.0, float(np.float32(3e-4)), 1000, "log")
want_scale, want_lr = [], []
for r in tr:
    want_scale.append(scaler.scale); want_lr.append(sched.lr())
    scaler.update_scale(r["skipped"])
    if not r["skipped"]: sched.step()
ok = ok and [r["loss_scale"] for r in tr] == want_scale and [np.float32(r["lr"]) for r in tr] == [np.float32(x) for x in want_lr]
print("       losses %s; loss scale %s; skipped %s; lr %s (DeepSpeed: %s)" % ([round(r["loss"], 4) for r in tr],
      [r["loss_scale"] for r in tr], [r["skipped"] for r in tr], [r["lr"] for r in tr], want_lr))
sys.exit(0 if ok else 1)
PYEOF
check "example config: trains 6 steps at 4 ranks in fp16, batch 32 = 4 x 2 x 4, scale and lr per step as DeepSpeed's, config record" $?
grep -q "^note: .*offload_optimizer.device: \"cpu\": the CPU trainer's optimizer state is in host memory already" "$TMP/example.out" &&
! grep -q "fp16" <(grep -E "^(\[rank [0-9]+\] )?(warning|error)" "$TMP/example.out")
check "example config: the CPU-offload note, no warning about fp16" $?
[ "$(grep -c "offload_optimizer.device: \"cpu\"" "$TMP/example.out")" -eq 1 ]; check "notes and warnings come from rank 0 only" $?

cat > "$TMP/auto.json" <<'EOF'
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
 "gradient_clipping": "auto", "steps_per_print": "auto", "wall_clock_breakdown": "auto",
 "zero_optimization": {"stage": "auto", "overlap_comm": "auto", "contiguous_gradients": "auto", "reduce_bucket_size": "auto",
   "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": "auto",
   "stage3_max_reuse_distance": "auto", "stage3_gather_16bit_weights_on_model_save": "auto", "sub_group_size": "auto",
   "offload_optimizer": {"device": "auto", "pin_memory": "auto"}, "offload_param": {"device": "auto", "pin_memory": "auto"}},
 "optimizer": {"type": "auto", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
 "scheduler": {"type": "auto", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
 "fp16": {"enabled": "auto", "loss_scale": "auto", "loss_scale_window": "auto", "initial_scale_power": "auto",
   "hysteresis": "auto", "min_loss_scale": "auto"},
 "bf16": {"enabled": "auto"}}
EOF
A="$M --batch 2 --accum 2 --lr 1e-3 --warmup 2 --steps 3"
timeout 300 $MPIRUN -np 2 ./build/z3/train_gpt_cpu $A --config "$TMP/auto.json" --log "$TMP/auto.jsonl" > "$TMP/auto.out" 2>&1 &&
timeout 300 $MPIRUN -np 2 ./build/z3/train_gpt_cpu $A --log "$TMP/none.jsonl" > /dev/null 2>&1
rc=$?
[ -s "$TMP/auto.out" ] && grep "^configuration\|^  auto" "$TMP/auto.out" | sed 's/^/       /'
$PY - "$TMP/auto.jsonl" "$TMP/none.jsonl" $rc "$TMP/auto.json" <<'PYEOF'
import json, sys
if sys.argv[3] != "0": sys.exit(1)
n_auto = open(sys.argv[4]).read().count('"auto"')
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ca, cb = a[0], b[0]
la, lb = ([r["loss"] for r in x if r["type"] == "train"] for x in (a, b))
auto = ca.pop("auto"); cb.pop("auto"); ca.pop("config_file")
print("       %d keys said \"auto\"; losses %s (no config: %s)" % (len(auto), la, lb))
sys.exit(0 if len(auto) == n_auto and ca == cb and la == lb and len(la) == 3 else 1)
PYEOF
check "\"auto\" in every field: trains; resolved config and losses identical to the run without a config" $?

echo "== 7. optimizer.type Adam with adam_w_mode false: L2 weight decay, as torch.optim.Adam"
S="--preset tiny --dim 32 --heads 2 --vocab 250 --seq 16 --batch 2 --train $TMP/train.bin --threads 1 --quiet 1 --steps 6 --lr 3e-3 --weight-decay 0.5 --lr-schedule constant"
./build/z0/train_gpt_cpu $S --adam-w-mode 0 --log "$TMP/l2_c.jsonl" > /dev/null 2>&1 &&
./build/z0/train_gpt_cpu $S --log "$TMP/w_c.jsonl" > /dev/null 2>&1 &&
./build/z0/train_gpt_cpu $S --config "$(cfg adam '{"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}}')" --log "$TMP/l2_cfg.jsonl" > /dev/null 2>&1 &&
$PY scripts/train_gpt.py $S --adam-w-mode 0 --log "$TMP/l2_py.jsonl" > /dev/null 2>&1 &&
$PY - "$TMP/l2_c.jsonl" "$TMP/l2_py.jsonl" "$TMP/w_c.jsonl" "$TMP/l2_cfg.jsonl" <<'PYEOF'
import json, sys
l2c, l2p, wc, l2cfg = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in sys.argv[1:])
d = max(abs(a - b) for a, b in zip(l2c, l2p))
dw = max(abs(a - b) for a, b in zip(l2c, wc))
print("       C vs PyTorch (torch.optim.Adam) max |loss diff| %.1e over %d steps; AdamW differs by %.1e; config == flag: %s" % (d, len(l2c), dw, l2c == l2cfg))
sys.exit(0 if len(l2c) == len(l2p) == 6 and d < 2e-5 and dw > 10 * d and l2c == l2cfg else 1)
PYEOF
check "Adam with L2 weight decay: C trainer == PyTorch reference, != AdamW; the config key == the flag" $?

echo "== 8. a config of non-default values trains bitwise as the same values given as flags"
# every honoured key of the training's math, off its default (the fp16 scaler's keys have no flags: both runs
# take them from the config); total_num_steps is also the run's length when --steps is not given
cat > "$TMP/values.json" <<'EOF'
{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "gradient_clipping": 0.3,
 "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.2}},
 "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 2e-3, "warmup_num_steps": 3,
   "warmup_type": "linear", "total_num_steps": 7}},
 "fp16": {"enabled": true, "initial_scale_power": 12, "loss_scale_window": 3, "hysteresis": 3, "min_loss_scale": 2}}
EOF
V="--preset tiny --dim 32 --heads 2 --vocab 250 --seq 16 --train $TMP/train.bin --threads 1 --quiet 1"
./build/z0/train_gpt_cpu $V --config "$TMP/values.json" --log "$TMP/values_cfg.jsonl" > /dev/null 2>&1 &&
./build/z0/train_gpt_cpu $V --total-batch 8 --batch 2 --accum 4 --clip 0.3 --lr 2e-3 --beta1 0.8 --beta2 0.95 --eps 1e-6 \
    --weight-decay 0.2 --lr-schedule WarmupDecayLR --warmup-min-lr 1e-4 --warmup 3 --warmup-type linear --lr-total-steps 7 --steps 7 \
    --config "$(cfg fp16only '{"fp16": {"enabled": true, "initial_scale_power": 12, "loss_scale_window": 3, "hysteresis": 3, "min_loss_scale": 2}}')" \
    --log "$TMP/values_flags.jsonl" > /dev/null 2>&1
rc=$?
$PY - "$TMP/values_cfg.jsonl" "$TMP/values_flags.jsonl" $rc <<'PYEOF'
import json, sys
if sys.argv[3] != "0": sys.exit(1)
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ca, cb = a[0], b[0]
for c in (ca, cb): c.pop("config_file"); c.pop("auto", None)
ta, tb = ([(r["loss"], r["lr"], r.get("loss_scale")) for r in x if r["type"] == "train"] for x in (a, b))
differ = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
print("       config: %d steps, losses %s; lr %s; resolved settings that differ from the flags': %s"
      % (len(ta), [round(t[0], 5) for t in ta], [float("%.3g" % t[1]) for t in ta], differ or "none"))
sys.exit(0 if len(ta) == 7 and ta == tb and not differ else 1)
PYEOF
check "batch, clipping, optimizer, schedule keys = their flags: the resolved configuration and every step's loss, lr and scale" $?
[ $fails -eq 0 ]
