#!/usr/bin/env python3
"""scripts/plot_losses.py: plot the train (and val) loss of any number of JSONL training logs.

    /usr/bin/python3 scripts/plot_losses.py out/compare/c_gpt2.jsonl out/compare/torch_gpt2.jsonl \
        --out out/compare/loss_gpt2.png [--labels C,PyTorch] [--title TEXT] [--baseline LOSS:LABEL]

Logs are the --log files of train_gpt_cpu, train_gpt and scripts/train_gpt.py: one JSON object per
line, {"type":"train","step":S,"loss":L,...} and {"type":"val","step":S,"val_loss":V}.
A run and its resume are one curve, whether the resume appended to the same --log or wrote another
file given right after the first (it starts past step 1, inside or just after the first): from the
resume's first step on its records replace the earlier ones; a dotted line marks where it took over.
--baseline draws a horizontal line at LOSS named LABEL (the demo's: what word frequencies alone give on
val). The title and the baselines also go into the PNG's metadata (Title, Description).
With two curves, prints as its last line the max |loss diff| between them over their common steps.
Errors are one line on stderr and exit status 1.
"""
import json
import os
import sys


def die(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def read_log(path):
    """{step: loss}, {step: val_loss} and the steps where a resumed run took over: a run resumed with the same
    --log appends to it, after a new config record; from its first step on its records replace the earlier ones
    (a resume from an earlier checkpoint runs those steps again)."""
    train, val, resumes = {}, {}, []
    resumed = False
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
                if kind == "config" and train:
                    resumed = True
                elif kind == "train":
                    step = int(r["step"])
                    if resumed:
                        take_over(train, val, resumes, step)
                        resumed = False
                    train[step] = float(r["loss"])
                elif kind == "val":
                    val[int(r["step"])] = float(r["val_loss"])
            except (ValueError, KeyError, TypeError, AttributeError):
                die("%s:%d: not a training log record: %.60s" % (path, n, line))
    return train, val, resumes


def take_over(train, val, resumes, step):
    """the run resumed at `step`: the earlier records from there on are gone"""
    for d in (train, val):
        for s in [s for s in d if s >= step]:
            del d[s]
    resumes.append(step)


def join_resumes(logs, labels, data):
    """A log that starts after step 1, past the first step of the log before it and at most one step after its last,
    is that run resumed into another --log file: the two are one curve (take_over), labelled "a + b"."""
    out = []
    for path, label, (train, val, resumes) in zip(logs, labels, data):
        first = min(train) if train else 0
        if out and first > 1:
            plabel, (ptrain, pval, presumes) = out[-1]
            if ptrain and min(ptrain) < first <= max(ptrain) + 1:
                take_over(ptrain, pval, presumes, first)
                ptrain.update(train)
                pval.update(val)
                presumes.extend(resumes)
                out[-1] = (plabel + " + " + label, (ptrain, pval, presumes))
                print("%s continues %s from step %d (a resumed run): joined" % (path, plabel, first))
                continue
        out.append((label, (train, val, resumes)))
    return [lab for lab, _ in out], [d for _, d in out]


def main(argv):
    logs, labels, out, title, baselines = [], None, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a in ("--out", "--labels", "--title", "--baseline"):
            if i + 1 >= len(argv):
                die("%s: missing value" % a)
            v = argv[i + 1]
            i += 2
            if a == "--out":
                out = v
            elif a == "--labels":
                labels = v.split(",")
            elif a == "--baseline":
                loss, _, name = v.partition(":")
                try:
                    baselines.append((float(loss), name or "baseline"))
                except ValueError:
                    die("--baseline: expected LOSS:LABEL, got '%s'" % v)
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
    if out:   # before anything is printed: it may run the script again under another Python
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import need_modules
        need_modules.require("matplotlib")
    data = [read_log(p) for p in logs]
    for p, (tr, _, _) in zip(logs, data):
        if not tr:
            die("%s: no train records" % p)
    labels, data = join_resumes(logs, labels, data)

    if out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        two = len(data) >= 2
        fig, axes = plt.subplots(2 if two else 1, 1, figsize=(9, 8 if two else 5), squeeze=False,
                                 gridspec_kw={"height_ratios": [3, 1]} if two else None)
        ax = axes[0][0]
        for k, ((tr, va, resumes), lab) in enumerate(zip(data, labels)):
            steps = sorted(tr)
            line, = ax.plot(steps, [tr[s] for s in steps], label=lab + " train", lw=1.2,
                            ls="-" if k == 0 else "--")
            if va:
                vs = sorted(va)
                ax.plot(vs, [va[s] for s in vs], "o", color=line.get_color(), ms=4, label=lab + " val")
            for r in resumes:   # where a resumed run took over
                ax.axvline(r - 0.5, color=line.get_color(), ls=":", lw=0.8)
        for loss, name in baselines:
            ax.axhline(loss, color="gray", ls="-.", lw=1, label="%s: %.2f" % (name, loss))
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
            meta = {"Title": title or "", "Description": "; ".join("%s: %.4f" % (n, l) for l, n in baselines)}
            fig.savefig(out, dpi=110, metadata=meta)
        except OSError as e:
            die("%s: cannot write (%s)" % (out, e.strerror))
        print("wrote %s" % out)

    for (tr, va, resumes), lab in zip(data, labels):
        steps = sorted(tr)
        print("%s: %d steps, loss %.6f -> %.6f%s%s" % (lab, len(steps), tr[steps[0]], tr[steps[-1]],
                                                       ", last val %.6f" % va[max(va)] if va else "",
                                                       "".join(", resumed at step %d" % r for r in sorted(resumes))))
    if len(data) >= 2:
        common = sorted(set(data[0][0]) & set(data[1][0]))
        if not common:
            die("%s and %s have no common steps" % (labels[0], labels[1]))
        diffs = [abs(data[0][0][s] - data[1][0][s]) for s in common]
        worst = max(range(len(common)), key=lambda j: diffs[j])
        print("largest |loss diff| at step %d: %.6f vs %.6f" % (common[worst], data[0][0][common[worst]], data[1][0][common[worst]]))
        print("max |loss diff| over %d steps: %.3e" % (len(common), diffs[worst]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
