"""tests/readme_examples.py: every command README.md shows, run as a user would run it (tests/test_readme.sh).

    python3 tests/readme_examples.py SCRATCH_DIR

The commands are the lines of README.md's code blocks and its inline code that starts like a command
(./, make, mpirun, scripts/, TESTS=). Each must match one of RULES, which says how it runs here: as
written, shortened (and how), or not at all (and why). A command no rule matches fails: a new README
example needs a rule. They run in README order, from the repository root, so that later examples use
what earlier ones made (the run the save example writes is the one the export, --init and sampling
examples read). Everywhere:
  - what the examples write goes to SCRATCH_DIR: out/ -> SCRATCH/out/, data/mine/ -> SCRATCH/data/mine/;
    the user's own files are stand-ins there: my.txt (200 KB of the Brown text, its documents kept),
    ds_config.json (a micro batch, accumulation and AdamW);
  - "..." (the flags of your run) becomes the rule's few flags;
  - make runs with -s; mpirun gets --mca btl self,vader (shared memory: as the other tests run it).
Exits 1 on the first command that fails, printing its output's tail.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMAND = re.compile(r"^(\./|make |mpirun |scripts/|TESTS=)\S*( |$)")

# (pattern matched against the command as README.md writes it, action, what it becomes and why)
#   action: "run" (with the replacements), "skip", or "nogpu" (the GPU trainer on a machine without a GPU)
RULES = [
    (r"make demo", "skip", "the whole demo takes minutes: tests/test_scripts.sh runs scripts/demo.sh with STEPS=0"),
    (r"make test", "skip", "the suite this test is part of"),
    (r"TESTS=\S+ bash tests/run\.sh", "skip", "the suite this test is part of"),
    (r"make train_gpt(_cpu)?", "skip", "what a build without nvcc says, and the CPU build's line: tests/test_build.sh"),
    (r"make train_gpt ZERO=3 && mpirun -np 4 \./train_gpt", "nogpu",
     "the GPU line: build/gpu_z3_o0/train_gpt (what make train_gpt ZERO=3 builds, made by tests/test_gpu_build.sh) on 4 ranks"),
    (r"\./train_gpt \.\.\.", "nogpu", "one rank of the GPU trainer: build/gpu_z0_o0/train_gpt --steps 2"),
    (r"make train_gpt_cpu ZERO=3 && mpirun --allow-run-as-root --oversubscribe -np 4 \./train_gpt_cpu", "run",
     [("./train_gpt_cpu", "./train_gpt_cpu --steps 2")], "--steps 2 (the default is 50)"),
    (r"make train_gpt_cpu && \./train_gpt_cpu --preset small --steps 200 --val-every 50", "run",
     [("--steps 200", "--steps 2"), ("--val-every 50", "--val-every 2")], "--steps 2 --val-every 2"),
    (r"make train_gpt_cpu ZERO=3 && mpirun -np 4 \./train_gpt_cpu --steps 2", "run",
     [("mpirun ", "mpirun {ROOT_FLAGS}")], "with the flags above as root, as README says"),
    (r"scripts/prepare_data\.sh --input my\.txt --out data/mine/mine --val-fraction 0\.05", "run", [], "the stand-in my.txt"),
    (r"\./train_gpt_cpu --train data/mine/mine_train\.bin --val data/mine/mine_val\.bin --val-every 50 \.\.\.", "run",
     [("--val-every 50", "--val-every 2"), ("...", "--steps 2")], "... = --steps 2, --val-every 2"),
    (r"\./train_gpt_cpu \.\.\. --save out/run --save-every 100", "run",
     [("...", "--steps 4"), ("--save-every 100", "--save-every 2")], "... = --steps 4, --save-every 2"),
    (r"\./train_gpt_cpu \.\.\. --save out/run --resume out/run", "run", [("...", "--steps 6")], "... = --steps 6: steps 5-6"),
    (r"\./train_gpt_cpu --config ds_config\.json \.\.\.", "run", [("...", "--steps 2")], "... = --steps 2, the stand-in ds_config.json"),
    (r"\./train_gpt_cpu --config-keys", "run", [], "as written"),
    (r"make export_model && \./export_model out/run out/hf", "run", [], "the run the save example wrote"),
    (r"\./train_gpt_cpu --init out/hf/model\.safetensors \.\.\.", "run", [("...", "--steps 2")], "... = --steps 2"),
    (r'\./train_gpt_cpu --sample 1 --resume out/run --prompt "The jury said" --temperature 0\.8 --top-k 40', "run", [],
     "as written, on the saved run (64 positions, as the demo's model: the default --sample-len shrinks to fit, with a note)"),
    (r"\./train_gpt_cpu --preset gpt2-124m --seq 1024 --estimate-memory 8 --memory-budget 16", "run", [], "as written"),
    (r"make compare ARCH=gpt2 STEPS=200", "run", [("STEPS=200", "STEPS=2")], "STEPS=2, OUT under the scratch folder"),
    (r"make -s all zero-bins prepare_data", "run", [], "as written"),
]


def commands(readme):
    fence = False
    for no, line in enumerate(open(readme, encoding="utf-8"), 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            c = re.sub(r"\s+#.*$", "", line).strip()
            if c:
                yield no, c
        else:
            for c in re.findall(r"`([^`]+)`", line):
                if COMMAND.match(c) and " " in c:   # a path such as `scripts/setup.sh` is no command
                    yield no, c


def stand_ins(scratch):
    os.makedirs(os.path.join(scratch, "out"), exist_ok=True)
    text = open(os.path.join(ROOT, "data/brown/train.txt"), "rb").read(200000)
    open(os.path.join(scratch, "my.txt"), "wb").write(text[:text.rfind(b"<|endoftext|>")])
    open(os.path.join(scratch, "ds_config.json"), "w").write(
        '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,\n'
        ' "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}}\n')


def rewrite(cmd, repl, scratch):
    root_flags = "--allow-run-as-root --oversubscribe " if os.geteuid() == 0 else "--oversubscribe "
    for old, new in repl:
        cmd = cmd.replace(old, new.replace("{ROOT_FLAGS}", root_flags), 1)
    cmd = re.sub(r"(?<![\w/])out/", scratch + "/out/", cmd)
    cmd = re.sub(r"(?<![\w/])data/mine/", scratch + "/data/mine/", cmd)
    cmd = re.sub(r"(?<![\w/.])(my\.txt|ds_config\.json)\b", scratch + r"/\1", cmd)
    cmd = re.sub(r"\bmake ", "make -s ", cmd)
    return re.sub(r"\bmpirun ", "mpirun --mca btl self,vader ", cmd)


def run(cmd, env, timeout=300):
    p = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def no_gpu(cmd, env):
    """The GPU trainer where there is no GPU: the built binary, one error line and the CPU command."""
    if subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0:
        return "skipped: a GPU is here (tests/test_gpu.sh runs the GPU trainer)"
    ranks = 4 if "-np 4" in cmd else 1
    binary = "build/gpu_z3_o0/train_gpt" if ranks == 4 else "build/gpu_z0_o0/train_gpt"
    if not os.path.exists(os.path.join(ROOT, binary)):
        return "skipped: %s is not built (tests/test_gpu_build.sh builds it)" % binary
    line = ("mpirun --mca btl self,vader --allow-run-as-root --oversubscribe -np 4 %s" % binary if ranks == 4
            else "%s --steps 2" % binary)
    rc, out = run(line, env)
    errors = [l for l in out.splitlines() if "error" in l]
    if rc == 0 or len(errors) != 1 or "NVIDIA GPU" not in errors[0] or "make train_gpt_cpu" not in out:
        print(out[-2000:])
        raise SystemExit("FAIL: %s without a GPU: exit %d, %d error lines" % (line, rc, len(errors)))
    return "no GPU here: '%s' then the CPU command" % errors[0][:60]


def main():
    scratch = os.path.abspath(sys.argv[1])
    stand_ins(scratch)
    env = dict(os.environ, OUT=os.path.join(scratch, "out/compare"))
    found = list(commands(os.path.join(ROOT, "README.md")))
    ran = skipped = 0
    for no, cmd in found:
        rule = next((r for r in RULES if re.fullmatch(r[0], cmd)), None)
        if rule is None:
            raise SystemExit("FAIL: README.md:%d: `%s`: no rule in tests/readme_examples.py says how to run it" % (no, cmd))
        if rule[1] == "skip":
            print("  README.md:%d %s\n       not run: %s" % (no, cmd, rule[2]))
            skipped += 1
            continue
        if rule[1] == "nogpu":
            print("  README.md:%d %s\n       %s: %s" % (no, cmd, rule[2], no_gpu(cmd, env)))
            ran += 1
            continue
        line = rewrite(cmd, rule[2], scratch)
        rc, out = run(line, env)
        bad = [l for l in out.splitlines() if re.match(r"(\[rank \d+\] )?error: ", l)]
        if rc != 0 or bad:
            print(out[-3000:])
            raise SystemExit("FAIL: README.md:%d: `%s` (run as: %s): exit %d" % (no, cmd, line, rc))
        notes = [l for l in out.splitlines() if l.startswith(("note:", "warning:"))]
        print("  README.md:%d %s\n       %s; ran: exit 0%s" % (no, cmd, rule[3], "".join("\n       " + n for n in notes[:2])))
        ran += 1
    print("%d README commands: %d run, %d not run (the suite and the demo)" % (len(found), ran, skipped))


if __name__ == "__main__":
    main()
