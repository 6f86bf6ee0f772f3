"""tests/docs_examples.py: every output line the docs show comes from a real run of its example.

    python3 tests/docs_examples.py SCRATCH_DIR [--show]

The shown lines are the lines of docs/*.md's code blocks that start like the programs' output (note:,
warning:, error:, demo:, train:, val:, step ...). Each must match one of EXAMPLES, which runs the example
that printed it, in SCRATCH_DIR (data/brown/ and the tokenizer linked in, the user's files as stand-ins),
and checks that the run printed the line: equal, except where the example's `vary` patterns mark what
changes from run to run (times, pids, the load). Or it matches one of NOT_RUN, which says why it is not
run here (a signal's timing, a full disk, a GPU, the 300-step demo) and which test checks that line's
message instead. A shown line neither matches fails: a new docs example needs a rule. --show prints what
each example printed. Exits 1 on the first example whose line was not printed, with that run's output.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOWN = re.compile(r"\s*((note|warning|error|demo): |train: |val: |step +\d+/\d+ \|)")
T0 = ROOT + "/build/z0/train_gpt_cpu"
TINY = "--preset tiny --batch 2 --seq 16 --threads 1 --quiet 1"
NUM = r"[0-9.]+"

# (doc, start of the shown line, bash command run in SCRATCH ("same": the previous one's), what varies, what it is)
EXAMPLES = [
    ("docs/training.md", "       train: data/mine/mine_train.bin: ",
     f"head -c 200000 {ROOT}/data/brown/train.txt | sed '$d' > my.txt && {ROOT}/scripts/prepare_data.sh --input $PWD/my.txt "
     f"--out $PWD/data/mine/mine --val-fraction 0.05 > /dev/null && {T0} --train data/mine/mine_train.bin --val data/mine/mine_val.bin "
     "--val-every 50 --steps 300 --until-startup", [], "your own text: the first 200 KB of Brown's train text as my.txt"),
    ("docs/training.md", "       val:   data/mine/mine_val.bin: ", "same", [], "the same run's val line"),
    ("docs/checkpoints.md", "note: out/run.jsonl: ",
     f"{T0} {TINY} --steps 150 --save out/run --save-every 100 --log out/run.jsonl --val-every 50 && "
     f"{T0} {TINY} --steps 150 --resume out/run/ckpt_00000100 --save out/run --log out/run.jsonl", [],
     "150 steps logged, resumed from step 100 into the same log"),
    ("docs/checkpoints.md", "error: --arch gpt2 disagrees",
     f"{T0} {TINY} --arch llama --steps 40 --save out/run && {T0} --arch gpt2 --resume out/run", [], "a llama run resumed with --arch gpt2"),
    ("docs/checkpoints.md", "note: --resume: the learning-rate schedule",
     f"{T0} {TINY} --steps 40 --save out/run && {T0} --resume out/run --steps 100 --quiet 1", [], "40 steps, resumed with --steps 100"),
    ("docs/checkpoints.md", "note: out/run: set aside ckpt_00000040",
     f"{T0} {TINY} --steps 40 --save out/run --save-every 20 && {T0} --resume out/run/ckpt_00000020 --save out/run --quiet 1", [],
     "40 steps saved every 20, resumed from step 20 into the same folder"),
    ("docs/training.md", "demo: expected training time:",
     f"python3 {ROOT}/scripts/demo_expect.py {ROOT}/bench/demo_time.txt 300 4",
     [r"(?<=now is )[0-9.]+", r"(?<=so about )[0-9.]+ (s|min)"], "what make demo says first; the load varies"),
    ("docs/training.md", "step    2/3 | loss 10.768218",
     f"{T0} --preset tiny --steps 3 --batch 4 --seq 64 --threads 1 --breakdown 1 --peak-tflops 0.1",
     [r"(?<=\| )[0-9.]+ ms", r"[0-9]+ tok/s", r"(?<=MFU )[0-9.]+", r"(?<=mem )[0-9.]+", r"[0-9:]+, ETA [0-9:]+"],
     "3 steps of gpt2 tiny with --breakdown 1 --peak-tflops 0.1; times vary"),
]
# the lines not run here, by doc: (start of the shown line, why, and the test that checks its message)
NOT_RUN = {
    "docs/checkpoints.md": [("error: checkpoint ckpt_00000040 not saved", "a full disk: tests/test_save_failure.sh (a tmpfs)"),
                            ("error: checkpoint ckpt_00000040 saved, but", "a failing fsync: tests/test_save_failure.sh"),
                            ("error: --save: out/run is in use", "another run's pid and host: tests/test_savedir.sh")],
    "docs/failures.md": [("error: the run ended on", "non-finite steps at the end of a run: tests/test_fp16.sh"),
                         ("error: watchdog:", "a stalled rank after 600 s: tests/test_watchdog.sh"),
                         ("note: stopped by SIGTERM after step 812", "a signal's step depends on timing: tests/test_signals.sh")],
    "docs/gpu.md": [("error: no NVIDIA GPU found", "the GPU trainer's build: tests/test_gpu_build.sh")],
    "docs/monitoring.md": [("note: tensorboard: runs/gpt2-124m:", "tests/test_monitor.sh checks the cut's note"),
                           ("note: ds.json: wandb:", "tests/test_config.sh checks the W&B note"),
                           ("error: runs/DeepSpeedJobName is in use", "a live run's pid and host: tests/test_monitor.sh")],
    "docs/training.md": [("demo: train loss", "the 300-step demo (minutes): make demo prints it"),
                         ("demo: val loss", "the 300-step demo"), ("demo: word frequencies alone", "the 300-step demo")],
}
RULES = EXAMPLES + [(doc, start, None, [], why) for doc, lines in NOT_RUN.items() for start, why in lines]


def shown_lines():
    for md in sorted(glob.glob(os.path.join(ROOT, "docs/*.md"))):
        fence = False
        for no, line in enumerate(open(md, encoding="utf-8"), 1):
            if line.startswith("```"):
                fence = not fence
            elif fence and SHOWN.match(line):
                yield os.path.relpath(md, ROOT), no, line.rstrip("\n")


def run(cmd, scratch):
    """the command's output; --until-startup: the trainer stopped once its start-up lines are out"""
    until = "--until-startup" in cmd
    cmd = cmd.replace(" --until-startup", "")
    p = subprocess.Popen(["bash", "-c", "rm -rf out && " + cmd], cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    out = []
    for raw in p.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        out.append(line)
        if until and line.lstrip().startswith("val:"):
            os.killpg(p.pid, 9)
            break
    p.wait()
    return out


def pattern(shown, vary):
    """the shown line as a regex: literal, except the parts that vary from run to run"""
    spans = sorted(m.span() for v in vary for m in re.finditer(v, shown))
    out, at = "", 0
    for a, b in spans:
        if a < at:
            continue
        out += re.escape(shown[at:a]) + ".+?"
        at = b
    return re.compile(out + re.escape(shown[at:]) + "$")


def setup(scratch):
    os.makedirs(os.path.join(scratch, "data"), exist_ok=True)
    for name in ("brown", "gpt2_tokenizer.bin"):
        link = os.path.join(scratch, "data", name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(ROOT, "data", name), link)


def main():
    scratch = os.path.abspath(sys.argv[1])
    show = "--show" in sys.argv
    setup(scratch)
    outputs, n_run, n_not = {}, 0, 0
    for doc, no, line in shown_lines():
        rule = next((e for e in RULES if e[0] == doc and line.startswith(e[1])), None)
        if rule is None:
            raise SystemExit("FAIL: %s:%d: %s: no example in tests/docs_examples.py says where it comes from" % (doc, no, line[:80]))
        _, start, cmd, vary, why = rule
        if cmd is None:
            print("  %s:%d %s...\n       not run: %s" % (doc, no, line.strip()[:60], why))
            n_not += 1
            continue
        if cmd == "same":
            cmd = next(e[2] for e in reversed(EXAMPLES[:EXAMPLES.index(rule)]) if e[2] != "same")
        if cmd not in outputs:
            outputs[cmd] = run(cmd, scratch)
            if show:
                print("\n".join("     | " + l for l in outputs[cmd]))
        pat = pattern(line.replace("[rank 0] ", ""), vary)
        if not any(pat.match(l) for l in outputs[cmd]):
            print("\n".join(outputs[cmd][-40:]))
            raise SystemExit("FAIL: %s:%d: the example (%s) did not print the shown line:\n  %s" % (doc, no, why, line))
        print("  %s:%d %s...\n       printed by: %s" % (doc, no, line.strip()[:60], why))
        n_run += 1
    print("%d output lines in the docs: %d printed by their examples here, %d checked elsewhere" % (n_run + n_not, n_run, n_not))


if __name__ == "__main__":
    main()
