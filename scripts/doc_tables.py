#!/usr/bin/env python3
"""The measured tables of the docs, from real runs of the CPU trainer.

Each table sits in a doc between "<!-- doc_tables: NAME -->" and "<!-- /doc_tables -->".
  python3 scripts/doc_tables.py           print what the runs give, and which tables differ
  python3 scripts/doc_tables.py --write   write them into the docs
  python3 scripts/doc_tables.py --check   exit 1 when a committed table differs (tests/test_doc_tables.sh)
Needs `make zero-bins`. The runs: every stage at 4 ranks, two micro-steps of one step (memory and
communication per rank), and the estimator (--estimate-memory), which allocates nothing.
Writes docs/zero.md's, docs/memory.md's, docs/gpu.md's and docs/offload.md's. One table is read, not run:
docs/benchmarks.md's ZeRO++ convergence, from the record bench/zeropp_convergence.sh wrote (hours of training).
"""
import json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]
RUN = ["--preset", "small", "--batch", "2", "--seq", "64", "--accum", "2", "--steps", "1", "--threads", "1", "--quiet", "1"]
RUN_TEXT = "mpirun -np 4 build/zK/train_gpt_cpu --preset small --batch 2 --seq 64 --accum 2 --steps 1"
GPT2 = ["--preset", "gpt2-124m", "--batch", "16", "--seq", "1024", "--estimate-memory", "4"]
DOCS = {"zero_memory": "docs/zero.md", "zero_comm": "docs/zero.md", "gpt2_estimate": "docs/zero.md",
        "demo_states": "docs/memory.md", "flash_estimate": "docs/gpu.md", "offload_estimate": "docs/offload.md",
        "zeropp_convergence": "docs/benchmarks.md"}


def records(path, kind):
    return [r for r in map(json.loads, open(path)) if r.get("type") == kind]


def run(cmd, log):
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("failed: " + " ".join(cmd) + "\n" + r.stdout[-2000:])
    return log


def commas(x):
    return f"{int(round(x)):,}" if x else ""


def gb(x):
    return f"{x / 1e9:.2f} GB"


def measured(tmp):
    mem, comm = {}, {}
    for s in range(4):
        log = os.path.join(tmp, f"z{s}.jsonl")
        run(MPIRUN + ["-np", "4", f"build/z{s}/train_gpt_cpu"] + RUN + ["--log", log], log)
        mem[s], comm[s] = records(log, "memory")[0], records(log, "comm")[0]
    psi = mem[0]["params"]
    formula = {"params": ["4Ψ", "4Ψ", "4Ψ", "4Ψ/N"], "grads": ["4Ψ", "4Ψ", "4Ψ/N", "4Ψ/N"],
               "optimizer": ["8Ψ", "8Ψ/N", "8Ψ/N", "8Ψ/N"]}
    rows = [f"`{RUN_TEXT}`: gpt2, 4 layers, C = 128, Ψ = {psi:,.0f}, no padding at 4 × 16.", "",
            "| bytes per rank | stage 0 | stage 1 | stage 2 | stage 3 | formula, stage 0 / 1 / 2 / 3 |",
            "|---|---:|---:|---:|---:|---|"]
    for k in ["params", "grads", "optimizer"]:
        cells = [mem[s]["measured_bytes"][k] for s in range(4)]
        if any(mem[s]["measured_bytes"][k] != mem[s]["formula_bytes"][k] for s in range(4)):
            sys.exit(f"measured {k} differ from the formula: the table would not say what the docs say")
        rows.append(f"| {k} | " + " | ".join(commas(c) for c in cells) + " | " + " / ".join(formula[k]) + " |")
    rows.append("| **model states** | " + " | ".join(f"**{commas(mem[s]['model_states_measured'])}**" for s in range(4)) +
                " | 16Ψ / (8 + 8/N)Ψ / (4 + 12/N)Ψ / 16Ψ/N |")
    for k, what in [("gathered_params", "stage 3: the ring and the persistent units"),
                    ("grad_buckets", "stages 2-3: the slots and the reduce-scatter landing"),
                    ("activations", "saved for the backward"), ("scratch", "the backward's buffers")]:
        rows.append(f"| {k} | " + " | ".join(commas(mem[s]["measured_bytes"][k]) for s in range(4)) + f" | {what} |")
    mem_table = "\n".join(rows)
    rows = ["| collective | stage 0 | stage 1 | stage 2 | stage 3 |", "|---|---:|---:|---:|---:|"]
    for k in ["all_reduce", "reduce_scatter", "all_gather"]:
        if any(comm[s]["bytes_per_step"][k] != comm[s]["theory_bytes_per_step"][k] for s in range(4)):
            sys.exit(f"counted {k} bytes differ from the theory")
        rows.append(f"| {k} | " + " | ".join(f"{comm[s]['bytes_per_step'][k]:,}" for s in range(4)) + " |")
    rows.append("| total, in Ψ of 4-byte values | " + " | ".join(f"{comm[s]['total_bytes'] / comm[s]['psi_bytes']:.2f}" for s in range(4)) + " |")
    return mem_table, "\n".join(rows)


def estimate(tmp, args, name):
    log = os.path.join(tmp, name + ".jsonl")
    run(["build/z0/train_gpt_cpu"] + args + ["--log", log], log)
    return records(log, "estimate")[0]


def gpt2_table(tmp):
    plain = estimate(tmp, GPT2, "plain")["train_gpt"]
    rec = estimate(tmp, GPT2 + ["--recompute", "1"], "recompute")["train_gpt"]
    cpu = estimate(tmp, GPT2 + ["--recompute", "1", "--cpu-checkpointing", "1"], "cpuckpt")["train_gpt"]
    rows = ["`" + " ".join(["./train_gpt_cpu"] + GPT2) + " [--recompute 1 [--cpu-checkpointing 1]]`, the GPU trainer's "
            "bf16 with an fp32 master, bytes per rank:", "",
            "| stage | model states | ZeRO working | activations | scratch | total | with `--recompute` | "
            "+ `--cpu-checkpointing`: device; host |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in range(4):
        e = plain[f"stage{s}"]
        work = e["gathered_params"] + e["grad_buckets"] + e["nvme_buffers"] + e.get("dpu_copies", 0)
        c = cpu[f"stage{s}"]
        rows.append(f"| {s} | {gb(e['model_states'])} | {gb(work) if work else '0'} | {gb(e['activations'])} | "
                    f"{gb(e['scratch'])} | {gb(e['total'])} | {gb(rec[f'stage{s}']['total'])} | "
                    f"{gb(c['total'])}; {gb(c['host_total'])} |")
    return "\n".join(rows)


def demo_table(tmp):
    e = estimate(tmp, ["--arch", "llama", "--preset", "mini", "--estimate-memory", "4"], "demo")["train_gpt_cpu"]
    return ("| `--arch llama --preset mini --estimate-memory 4` | stage 0 | stage 1 | stage 2 | stage 3 |\n|---|---:|---:|---:|---:|\n"
            "| model states per rank | " + " | ".join(f"{e[f'stage{s}']['model_states'] / 1e6:.1f} MB" for s in range(4)) + " |")


def flash_table(tmp):
    rows = ["| `--attention` | activations | scratch | total |", "|---|---:|---:|---:|"]
    for a in ["cublas", "flash"]:
        e = estimate(tmp, ["--preset", "gpt2-124m", "--batch", "16", "--seq", "1024", "--estimate-memory", "1", "--attention", a],
                     "attention_" + a)["train_gpt"]["stage0"]
        rows.append(f"| {a} | {gb(e['activations'])} | {gb(e['scratch'])} | {e['total'] / 2**30:.2f} GiB |")
    return "\n".join(rows)


def offload_table(tmp):
    """train_gpt's GPT-2 124M at stage 3, 4 ranks, with offload: DPU's copies and Twin-Flow's sides."""
    base = GPT2 + ["--offload", "1", "--sub-group-size", "10000000"]
    rows = ["`" + " ".join(["./train_gpt_cpu"] + base) + "`, train_gpt's stage-3 row, bytes per rank:", "",
            "| setting | optimizer state on the device | optimizer state in host (pinned) | DPU's copies | device total | host (pinned) total |",
            "|---|---:|---:|---:|---:|---:|"]
    for label, extra in [("offload", []), ("offload + DPU", ["--offload-dpu", "1"]), ("Twin-Flow, ratio 0.75", ["--offload-ratio", "0.75"]),
                         ("Twin-Flow, ratio 0.5", ["--offload-ratio", "0.5"]), ("Twin-Flow, ratio 0.25", ["--offload-ratio", "0.25"]),
                         ("Twin-Flow, ratio 0", ["--offload-ratio", "0"])]:
        e = estimate(tmp, base + extra, "offload_" + label.replace(" ", "_").replace(",", ""))["train_gpt"]["stage3"]
        dev_opt = e["optimizer"] - e["host"]["optimizer"]
        rows.append(f"| {label} | {gb(dev_opt)} | {gb(e['host']['optimizer'])} | {gb(e.get('dpu_copies', 0))} | "
                    f"{gb(e['total'])} | {gb(e['host_total'])} |")
    return "\n".join(rows)


def zeropp_convergence_table():
    """Loss minus ZeRO-3's per variant, from bench/zeropp_convergence.txt's summary lines."""
    signed = lambda x: f"{float(x):+.3f}".replace("-", "\u2212")
    rows, model = [], None
    for line in open(os.path.join(ROOT, "bench/zeropp_convergence.txt"), encoding="utf-8"):
        m = re.match(r"the (demo|deeper) model, .*?(\d+) layers:", line)
        if m:
            model = ("demo, " if m.group(1) == "demo" else "") + f"{m.group(2)} layers"
        m = re.match(r"  (qwZ|qgZ|all three): (\d+) steps; loss - ZeRO-3's: mean (\S+), mean \|\.\| (\S+), final (\S+) .*"
                     r"final val (\S+) vs (\S+)", line)
        if m:
            rows.append([model, m.group(1), m.group(2), signed(m.group(3)), f"{float(m.group(4)):.3f}", signed(m.group(5)),
                         f"{float(m.group(6)):.3f}, {float(m.group(7)):.3f}", []])
        m = re.match(r"    \S+ (int8|int4) relative RMS error per step: (\S+) to (\S+),", line)
        if m:
            digits = 4 if m.group(1) == "int8" else 3
            rows[-1][-1].append(f"{m.group(1)} {float(m.group(2)):.{digits}f}\u2013{float(m.group(3)):.{digits}f}")
    head = ["| model | variant | steps | mean | mean \\|.\\| | final | final validation loss, ZeRO-3's | relative RMS error per step |",
            "|---|---|---:|---:|---:|---:|---|---|"]
    return "\n".join(head + ["| " + " | ".join(r[:-1] + [", ".join(r[-1])]) + " |" for r in rows])


def blocks(text):
    return {m.group(1): m.group(2) for m in re.finditer(r"<!-- doc_tables: (\w+) -->\n(.*?)<!-- /doc_tables -->", text, re.S)}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        mem_table, comm_table = measured(tmp)
        tables = {"zero_memory": mem_table, "zero_comm": comm_table, "gpt2_estimate": gpt2_table(tmp),
                  "demo_states": demo_table(tmp), "flash_estimate": flash_table(tmp), "offload_estimate": offload_table(tmp),
                  "zeropp_convergence": zeropp_convergence_table()}
    stale = []
    for name, doc in DOCS.items():
        path = os.path.join(ROOT, doc)
        text = open(path, encoding="utf-8").read()
        have = blocks(text)
        if name not in have:
            sys.exit(f"{doc} has no <!-- doc_tables: {name} --> block")
        want = tables[name] + "\n"
        if have[name] != want:
            stale.append(f"{doc}: {name}")
            if "--write" in sys.argv:
                text = text.replace(f"<!-- doc_tables: {name} -->\n{have[name]}<!-- /doc_tables -->",
                                    f"<!-- doc_tables: {name} -->\n{want}<!-- /doc_tables -->")
                open(path, "w", encoding="utf-8").write(text)
        if "--check" not in sys.argv and "--write" not in sys.argv:
            print(f"== {doc}: {name}\n{want}")
    for s in stale:
        print(("written: " if "--write" in sys.argv else "differs from the run: ") + s)
    if "--check" in sys.argv and stale:
        print("run: python3 scripts/doc_tables.py --write")
        sys.exit(1)
    if not stale:
        print(f"{len(DOCS)} tables equal what the runs print")


main()
