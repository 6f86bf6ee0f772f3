#!/usr/bin/env python3
"""Loads a zeroc run's TensorBoard event files with TensorBoard's own reader and checks
every scalar against the run's JSONL log.

    python3 scripts/tensorboard_check.py DIR --log run.jsonl

DIR is the job's directory (output_path/job_name). Prints each tag with its number of
points and exits non-zero on any difference: a tag or point missing or extra, a step
written twice, a value that is not the log's (as float32). Needs the `tensorboard`
package (the GPU machine's image has it); tests/tfevents_check.py runs the same checks
in `make test` with a protocol-buffer decoder instead. docs/monitoring.md describes
the metrics and their step axis (samples seen).
"""
import json
import math
import struct
import sys

# JSONL train-record field -> (tag, plotted at the samples seen before the step), as
# train/monitor.h's MONITOR_METRICS; the scale turns mem_bytes into GiB
TRAIN_FIELDS = [
    ("loss", "Train/Samples/train_loss", True, 1.0),
    ("lr", "Train/Samples/lr", True, 1.0),
    ("loss_scale", "Train/Samples/loss_scale", True, 1.0),
    ("grad_norm", "Train/Samples/grad_norm", True, 1.0),
    ("tokens_per_sec", "Train/Samples/tokens_per_sec", False, 1.0),
    ("gflops", "Train/Samples/gflops", False, 1.0),
    ("mfu", "Train/Samples/mfu", False, 1.0),
    ("mem_bytes", "Train/Samples/memory_GiB", False, 1.0 / 1073741824.0),
    ("forward_ms", "Train/Samples/elapsed_time_ms_forward", False, 1.0),
    ("backward_ms", "Train/Samples/elapsed_time_ms_backward", False, 1.0),
    ("comm_wait_ms", "Train/Samples/elapsed_time_ms_comm_wait", False, 1.0),
    ("optimizer_ms", "Train/Samples/elapsed_time_ms_step", False, 1.0),
]
EVAL_TAG = "Train/Samples/eval_loss"


def expected_scalars(log_path):
    """{tag: {samples: value (a Python float)}} that the monitors must hold for the run logged in
    log_path. A resumed run appends to its log: the last record of a step is the one that stands."""
    batch, train, val = None, {}, {}
    with open(log_path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "config":
                batch = r["train_batch_size"]
            elif r.get("type") == "train":
                train[r["step"]] = r
            elif r.get("type") == "val":
                val[r["step"]] = r["val_loss"]
    if batch is None:
        sys.exit("%s: no config record" % log_path)
    want = {}
    for step, r in train.items():
        for field, tag, at_start, scale in TRAIN_FIELDS:
            if field in r:
                want.setdefault(tag, {})[(step - 1 if at_start else step) * batch] = float(r[field]) * scale
    for step, v in val.items():
        want.setdefault(EVAL_TAG, {})[step * batch] = float(v)
    return want


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def logged_as_f32(v, w):
    """Whether float32 v is what the trainer wrote for the value its log reads as w. cJSON prints 15
    significant digits when they read back within DBL_EPSILON of the double, so w may be up to two
    ulps from the double that was written; only where that double sits on a midpoint between two
    float32 values does that ulp decide the rounding."""
    if same(v, f32(w)) or not math.isfinite(w):
        return same(v, f32(w))
    lo = hi = w
    for _ in range(2):
        lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
        if v in (f32(lo), f32(hi)):
            return True
    return False


def compare(want, got, say=print):
    """got: {tag: [(step, value), ...]} in file order. Prints a line per tag; returns the number of problems."""
    bad = 0
    for tag in sorted(set(want) | set(got)):
        points, w = got.get(tag, []), want.get(tag, {})
        steps = [s for s, _ in points]
        problems = []
        if len(set(steps)) != len(steps):
            problems.append("steps written more than once: %s" % sorted({s for s in steps if steps.count(s) > 1}))
        if set(steps) != set(w):
            problems.append("steps %s missing, %s extra" % (sorted(set(w) - set(steps)), sorted(set(steps) - set(w))))
        wrong = [(s, v, w[s]) for s, v in points if s in w and not logged_as_f32(v, w[s])]
        if wrong:
            problems.append("%d values differ from the log, first at step %d: %r, the log %r" % (len(wrong), *wrong[0]))
        if steps != sorted(steps):
            problems.append("steps out of order")
        say("  %-45s %4d points%s" % (tag, len(points), ": " + "; ".join(problems) if problems else ""))
        bad += len(problems)
    return bad


def main(argv):
    if len(argv) != 4 or argv[2] != "--log":
        sys.exit(__doc__.strip().split("\n\n")[1])
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        sys.exit("tensorboard_check: the tensorboard package is not installed for %s" % sys.executable)
    acc = EventAccumulator(argv[1], size_guidance={"scalars": 0})   # 0: keep every point
    acc.Reload()
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    print("tensorboard_check: %s (TensorBoard's EventAccumulator) against %s" % (argv[1], argv[3]))
    bad = compare(expected_scalars(argv[3]), got)
    print("tensorboard_check: %s" % ("every scalar matches the log" if not bad else "%d problems" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
