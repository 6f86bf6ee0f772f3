#!/usr/bin/env python3
"""scripts/plot_losses.py: plot the train (and val) loss of any number of JSONL training logs.

    /usr/bin/python3 scripts/plot_losses.py out/compare/c_gpt2.jsonl out/compare/torch_gpt2.jsonl \
        --out out/compare/loss_gpt2.png [--labels C,PyTorch] [--title TEXT]

Logs are the --log files of train_gpt_cpu, train_gpt and scripts/train_gpt.py: one JSON object per
line, {"type":"train","step":S,"loss":L,...} and {"type":"val","step":S,"val_loss":V}.
Prints, as its last line, the max |loss diff| between the first two logs over their common steps.
Errors are one line on stderr and exit status 1.
"""
import json
import os
import sys


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def read_log(path):
    train, val = {}, {}
    try:
        f = open(path)
    except OSError as e:
        die("%s: cannot open (%s)" % (path, e.strerror))
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
                kind = r.get("type")
                if kind == "train":
                    train[int(r["step"])] = float(r["loss"])
                elif kind == "val":
                    val[int(r["step"])] = float(r["val_loss"])
            except (ValueError, KeyError, TypeError, AttributeError):
                die("%s:%d: not a training log record: %.60s" % (path, n, line))
    return train, val


def main(argv):
    logs, labels, out, title = [], None, None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a in ("--out", "--labels", "--title"):
            if i + 1 >= len(argv):
                die("%s: missing value" % a)
            v = argv[i + 1]
            i += 2
            if a == "--out":
                out = v
            elif a == "--labels":
                labels = v.split(",")
            else:
                title = v
            continue
        if a.startswith("--"):
            die("unknown flag '%s' (see --help)" % a)
        logs.append(a)
        i += 1
    if not logs:
        die("no log files given (see --help)")
    if labels is None:
        labels = [os.path.splitext(os.path.basename(p))[0] for p in logs]
    if len(labels) != len(logs):
        die("--labels: %d labels for %d logs" % (len(labels), len(logs)))
    data = [read_log(p) for p in logs]
    for p, (tr, _) in zip(logs, data):
        if not tr:
            die("%s: no train records" % p)

    if out:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import need_modules
        need_modules.require("matplotlib")
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        two = len(data) >= 2
        fig, axes = plt.subplots(2 if two else 1, 1, figsize=(9, 8 if two else 5), squeeze=False,
                                 gridspec_kw={"height_ratios": [3, 1]} if two else None)
        ax = axes[0][0]
        for k, ((tr, va), lab) in enumerate(zip(data, labels)):
            steps = sorted(tr)
            line, = ax.plot(steps, [tr[s] for s in steps], label=lab + " train", lw=1.2,
                            ls="-" if k == 0 else "--")
            if va:
                vs = sorted(va)
                ax.plot(vs, [va[s] for s in vs], "o", color=line.get_color(), ms=4, label=lab + " val")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        ax.legend()
        if title:
            ax.set_title(title)
        if two:
            common = sorted(set(data[0][0]) & set(data[1][0]))
            ax2 = axes[1][0]
            ax2.plot(common, [data[1][0][s] - data[0][0][s] for s in common], lw=1)
            ax2.set_xlabel("step")
            ax2.set_ylabel("%s - %s" % (labels[1], labels[0]))
            ax2.grid(alpha=0.3)
        fig.tight_layout()
        d = os.path.dirname(out)
        try:
            if d:
                os.makedirs(d, exist_ok=True)
            fig.savefig(out, dpi=110)
        except OSError as e:
            die("%s: cannot write (%s)" % (out, e.strerror))
        print("wrote %s" % out)

    for (tr, va), lab, p in zip(data, labels, logs):
        steps = sorted(tr)
        print("%s: %d steps, loss %.6f -> %.6f%s" % (lab, len(steps), tr[steps[0]], tr[steps[-1]],
                                                     ", last val %.6f" % va[max(va)] if va else ""))
    if len(data) >= 2:
        common = sorted(set(data[0][0]) & set(data[1][0]))
        if not common:
            die("%s and %s have no common steps" % (logs[0], logs[1]))
        diffs = [abs(data[0][0][s] - data[1][0][s]) for s in common]
        worst = max(range(len(common)), key=lambda j: diffs[j])
        print("largest |loss diff| at step %d: %.6f vs %.6f" % (common[worst], data[0][0][common[worst]], data[1][0][common[worst]]))
        print("max |loss diff| over %d steps: %.3e" % (len(common), diffs[worst]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
