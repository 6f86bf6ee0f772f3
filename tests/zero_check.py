#!/usr/bin/env python3
"""ZeRO equivalence: every stage 0-3 at world sizes 1-4 against single-process stage 0.

For each architecture: a reference run (stage 0, one rank, micro batch N*B) and
runs of every stage at every world size (micro batch B per rank, same global
batch), gradient accumulation 2, 8 steps. gpt2 clips at the median gradient norm
of an unclipped probe, so that clipping is active on some steps and not on others;
llama clips at 1000, never active: clipping on every step would hide a gradient
off by a constant factor, as the clip coefficient cancels it. Checks, per run:
  - the per-step losses and gradient norms, the final full parameters (the fp32
    master) and the final AdamW moments m and v, reassembled from every rank's
    optimizer file, match the reference (max |a-b| / max |ref| <= 1e-5), reporting
    the max deviation;
  - measured per-rank model-state bytes equal the ZeRO formula on the padded
    parameter count, the padding is within its documented bound, and the
    memory estimator (--estimate-memory with the run's flags, which allocates
    nothing) predicted every allocation: model states, ZeRO's working buffers,
    activations and scratch;
  - counted communication bytes equal the theory, by collective;
  - stage 3: the peak of gathered elements never exceeds --max-live, and a
    build that poisons released buffers with NaN gives the same finite losses.
Sizes are odd (C=48, F=100, V=250) so that partitions need padding.
ZERO_CHECK_ARCHS, ZERO_CHECK_STAGES and ZERO_CHECK_WORLDS (comma-separated) run a
subset, as scripts/mutate.py does for a mutant of one stage.
"""
import json, os, subprocess, sys, tempfile
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import train_gpt  # noqa: E402  the reference's layout: which tensors make each unit
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]
TOL = 1e-5
ALIGN = 16
GLOBAL_B = 12       # sequences per micro-step across all ranks: divisible by 1, 2, 3, 4
ACCUM = 2
STEPS = 8
BYTES = {"params": 4, "grads": 4, "optimizer": 8}


def run(cmd, log):
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, timeout=300)
    if r.returncode != 0:
        print("command failed:", " ".join(cmd))
        print(open(log).read()[-2000:])
        sys.exit(1)


def records(path, kind):
    return [r for r in map(json.loads, open(path)) if r.get("type") == kind]


def final_params(ckdir):
    name = open(os.path.join(ckdir, "latest")).read().strip()
    b = open(os.path.join(ckdir, name, "model.bin"), "rb").read()
    return np.frombuffer(b[1024:], dtype=np.float32)


def final_moments(ckdir, unit_numels):
    """m and v of the whole model, in the flat order of model.bin, from every rank's
    optimizer file: each unit is padded to a multiple of P * align and cut into P
    slices, and rank r's file holds its slices of every unit end to end (zero/plan.h)."""
    name = open(os.path.join(ckdir, "latest")).read().strip()
    man = json.load(open(os.path.join(ckdir, name, "manifest.json")))
    P, align = man["partitions"], man["align"]
    shards = [-(-n // (P * align)) * align for n in unit_numels]
    m, v = [], []
    files = [np.fromfile(os.path.join(ckdir, name, f"optim_rank_{r:05d}.bin"), dtype=np.float32)[256:] for r in range(P)]
    total = sum(shards)
    for which, out in ((0, m), (1, v)):
        off = 0
        for n, sh in zip(unit_numels, shards):
            unit = np.concatenate([f[which * total + off: which * total + off + sh] for f in files])
            out.append(unit[:n])
            off += sh
    return np.concatenate(m), np.concatenate(v)


def unit_numels(model_flags):
    tensors, _ = train_gpt.build_layout(train_gpt.parse_args(["zero_check"] + model_flags).model)
    numels = {}
    for t in tensors:
        numels[t.unit] = numels.get(t.unit, 0) + t.numel
    return list(numels.values())


def rel_dev(a, ref):
    return float(np.max(np.abs(a - ref)) / np.max(np.abs(ref))) if a.shape == ref.shape else float("inf")


def subset(name, default):
    v = os.environ.get(name)
    return [type(default[0])(x) for x in v.split(",")] if v else default


def make_data(path, n, vocab, seed):
    rng = np.random.default_rng(seed)
    base = np.arange(n) % 89
    tok = ((base * 7 + rng.integers(0, 3, n)) % vocab).astype(np.uint16)
    h = np.zeros(256, dtype=np.int32)
    h[:3] = [20240520, 1, n]
    with open(path, "wb") as f:
        f.write(h.tobytes() + tok.tobytes())


def main():
    tmp = tempfile.mkdtemp(prefix="zero_check_")
    data = os.path.join(tmp, "train.bin")
    make_data(data, 60000, 250, 1)
    failures = 0
    worst = {}
    for arch in subset("ZERO_CHECK_ARCHS", ["gpt2", "llama"]):
        model = ["--arch", arch, "--preset", "tiny", "--dim", "48", "--heads", "4", "--ffn", "100", "--vocab", "250"]
        if arch == "llama":
            model += ["--kv-heads", "2"]
        numels = unit_numels(model)
        common = model + ["--train", data, "--seq", "16", "--accum", str(ACCUM), "--steps", str(STEPS),
                          "--lr", "1e-3", "--threads", "1", "--quiet", "1"]
        ref_cmd = [os.path.join(ROOT, "build/z0/train_gpt_cpu")] + common + ["--batch", str(GLOBAL_B)]
        clip = 1000.0
        if arch == "gpt2":
            probe_log = os.path.join(tmp, f"{arch}_probe.jsonl")
            run(ref_cmd + ["--clip", "0", "--log", probe_log], probe_log + ".out")
            clip = float(np.median([r["grad_norm"] for r in records(probe_log, "train")]))
        common += ["--clip", f"{clip:.6g}"]
        ref_log, ref_ck = os.path.join(tmp, f"{arch}_ref.jsonl"), os.path.join(tmp, f"{arch}_ref_ck")
        run(ref_cmd + ["--clip", f"{clip:.6g}", "--log", ref_log, "--save", ref_ck], ref_log + ".out")
        ref_losses = np.array([r["loss"] for r in records(ref_log, "train")])
        ref_norms = np.array([r["grad_norm"] for r in records(ref_log, "train")])
        ref_params = final_params(ref_ck)
        ref_m, ref_v = final_moments(ref_ck, numels)
        psi = ref_params.size
        clipped = int(np.sum(ref_norms > clip))
        print(f"{arch}: reference stage 0 x 1 rank, {psi} parameters, losses {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}, "
              f"clip {clip:.4g}: active on {clipped}/{STEPS} steps")
        want = "some but not all" if arch == "gpt2" else "none"
        if (arch == "gpt2" and not 0 < clipped < STEPS) or (arch == "llama" and clipped):
            print(f"  FAIL clipping must be active on {want} of the steps"); failures += 1
        for stage in subset("ZERO_CHECK_STAGES", [0, 1, 2, 3]):
            for world in subset("ZERO_CHECK_WORLDS", [1, 2, 3, 4]):
                variants = [("", [])]
                if stage == 3:
                    # the threshold is exactly the smallest unit's size, which therefore stays persistent (DeepSpeed's
                    # numel <= threshold): gpt2's final unit (2C = 96), llama's embedding; the rest is gathered.
                    # --max-live: just enough for the largest step plus one prefetch
                    variants = [("", ["--persistence-threshold", str(min(numels)), "--max-live", "40000"]),
                                ("poison", ["--persistence-threshold", "0", "--max-live", "40000"])]
                if stage <= 1 and world == 2:
                    # --overlap-reduce 0 (the GPU's default until a device run): every reduction at the boundary
                    variants.append(("boundary", ["--overlap-reduce", "0"]))
                for tag, extra in variants:
                    binary = f"build/z{stage}/train_gpt_cpu" + ("_poison" if tag == "poison" else "")
                    name = f"{arch}_z{stage}_n{world}{tag}"
                    log, ck = os.path.join(tmp, name + ".jsonl"), os.path.join(tmp, name + "_ck")
                    flags = common + extra + ["--batch", str(GLOBAL_B // world)]
                    run(MPIRUN + ["-np", str(world), os.path.join(ROOT, binary)] + flags + ["--log", log, "--save", ck], log + ".out")
                    # the memory estimator's prediction for the same flags, computed without allocating anything
                    est_log = os.path.join(tmp, name + "_estimate.jsonl")
                    run([os.path.join(ROOT, "build/z0/train_gpt_cpu")] + flags + ["--estimate-memory", str(world), "--log", est_log],
                        est_log + ".out")
                    estimate = records(est_log, "estimate")[0]["train_gpt_cpu"][f"stage{stage}"]
                    losses = np.array([r["loss"] for r in records(log, "train")])
                    norms = np.array([r["grad_norm"] for r in records(log, "train")])
                    params = final_params(ck)
                    m, v = final_moments(ck, numels)
                    dl = float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses))) if losses.size == ref_losses.size else float("inf")
                    dn = float(np.max(np.abs(norms - ref_norms) / ref_norms)) if norms.size == ref_norms.size else float("inf")
                    dp = rel_dev(params, ref_params)
                    dm, dv = rel_dev(m, ref_m), rel_dev(v, ref_v)
                    ok = max(dl, dn, dp, dm, dv) <= TOL and np.all(np.isfinite(losses))
                    notes = []
                    # memory: measured == formula on the padded count; padding within bound
                    mem = records(log, "memory")[0]
                    P = world if stage >= 1 else 1
                    n_units = 2 + 2  # embedding, 2 layers, final
                    pad = mem["params_padded"]
                    if pad % (P * ALIGN) or not (psi <= pad < psi + n_units * P * ALIGN):
                        ok = False; notes.append(f"padded count {pad} out of bound")
                    for k, b in BYTES.items():
                        sharded = {"params": stage >= 3, "grads": stage >= 2, "optimizer": stage >= 1}[k]
                        expect = b * pad / (world if sharded else 1)
                        if mem["measured_bytes"][k] != expect:
                            ok = False; notes.append(f"{k} bytes {mem['measured_bytes'][k]} != formula {expect}")
                    # the estimator predicted every allocation exactly: model states, ZeRO's working
                    # buffers, activations and scratch
                    for k, v in mem["measured_bytes"].items():
                        if estimate[k] != v:
                            ok = False; notes.append(f"estimate {k} {estimate[k]} != measured {v}")
                    # communication: counted == theory
                    comm = records(log, "comm")[-1]
                    for k, v in comm["bytes_per_step"].items():
                        if v != comm["theory_bytes_per_step"][k]:
                            ok = False; notes.append(f"{k} counted {v} != theory {comm['theory_bytes_per_step'][k]}")
                    # overlap: every unit's boundary reduction started inside the last micro-step's
                    # backward, as soon as its gradient was complete (stages 0-1: DDP-style buckets);
                    # with --overlap-reduce 0, none of them (stages 0-1), the same numbers
                    in_backward = 0 if tag == "boundary" else comm["units"]
                    if comm["reduced_in_backward"] != in_backward:
                        ok = False; notes.append(f"{comm['reduced_in_backward']} of {comm['units']} units reduced in the backward, expected {in_backward}")
                    if stage == 3 and world == 1:
                        # one rank: the shard is the model, used in place (zero_placement: whole): no gathers,
                        # no gather arena, no all-gather bytes
                        peak = max(r["peak_live_elems"] for r in records(log, "train"))
                        gathered = mem["measured_bytes"]["gathered_params"]
                        notes.append(f"one rank: {peak} elements gathered, {gathered} bytes of gather buffers")
                        if peak != 0 or gathered != 0 or comm["bytes_per_step"]["all_gather"] != 0:
                            ok = False; notes.append("ONE RANK GATHERED")
                    elif stage == 3:
                        peak = max(r["peak_live_elems"] for r in records(log, "train"))
                        notes.append(f"peak gathered {peak} <= 40000")
                        if peak > 40000 or peak == 0:
                            ok = False; notes.append("PEAK OVER LIMIT or nothing gathered")
                        # the gather buffers: the ring holds the live cap plus the largest gathered unit (its wrap's
                        # slack, zero/plan.h), beside the persistent units, those of at most the threshold's elements
                        threshold = int(extra[extra.index("--persistence-threshold") + 1])
                        padded = [-(-n // (world * ALIGN)) * world * ALIGN for n in numels]
                        resident = sum(p for n, p in zip(numels, padded) if n <= threshold)
                        slack = max(p for n, p in zip(numels, padded) if n > threshold)
                        want = BYTES["params"] * (mem["live_cap_elems"] + slack + resident)
                        if mem["measured_bytes"]["gathered_params"] != want:
                            ok = False; notes.append(f"gather buffers {mem['measured_bytes']['gathered_params']} B != live cap + "
                                                     f"largest unit + persistent units ({resident} elements) = {want} B")
                    ratio = comm["total_bytes"] / comm["psi_bytes"]
                    worst[arch] = max(worst.get(arch, 0), dl, dn, dp, dm, dv)
                    print(f"  stage {stage} x {world} rank{'s' if world > 1 else ' '} {tag:6s} loss dev {dl:.2e}  norm {dn:.2e}  "
                          f"param {dp:.2e}  m {dm:.2e}  v {dv:.2e}  "
                          f"model states {mem['model_states_measured']:8.0f} B/rank  comm {ratio:5.2f} psi/step  "
                          f"{'ok' if ok else 'FAIL'} {'; '.join(notes)}")
                    failures += not ok
    for arch, w in worst.items():
        print(f"{arch}: max deviation from single-process stage 0: {w:.2e} (tolerance {TOL:.0e})")
    print("zero_check:", "PASS" if failures == 0 else f"FAIL ({failures} runs)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
