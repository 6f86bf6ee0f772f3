#!/usr/bin/env python3
"""The learner's reading path, counted: README.md's "Learn ZeRO in this order", followed.

The reader reads README from its top to the end of that section, then each numbered
item's files in order: the files named in the item's bold lead, each from where the
reader left it, to its end or to the line before "up to `TEXT`". Prints the lines read
  - before meeting the stage-3 all-gather, zero.h's comm_iall_gather (budget 400);
  - until everything the stage-2 reduce-scatter depends on has been read (budget 1000);
and checks that README's count of the primitives is zero/backend.h's, and that zero.h and
zero/ keep at most 3 comment words per line of code, counted as ../shared/tools/comment_density.py
counts them. --check: exit 1 when a budget is exceeded or a dependency is never read.
"""
import os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## Learn ZeRO in this order"
GATHER = ("zero.h", r"= comm_iall_gather\(")
GATHER_BUDGET, STAGE2_BUDGET = 400, 1000
# What the stage-2 reduce-scatter depends on: (file, pattern, whole function or one line).
STAGE2 = [
    ("zero.h", r"^static void zero_reduce_scatter_slot\(", "func"),
    ("zero.h", r"^static floatX \*zero_open_slot\(", "func"),
    ("zero.h", r"^static void zero_grad_final\(", "func"),
    ("zero.h", r"^static floatX \*const \*zero_grads_open\(", "func"),
    ("zero.h", r"^static void zero_grads_end\(", "func"),
    ("zero.h", r"^static void zero_grads_close\(", "func"),
    ("zero/backend.h", r"zb_accumulate_reduced\(", "line"),
    ("zero/backend.h", r"zb_slot_acquire\(", "line"),
    ("zero/backend.h", r"zb_slot_release\(", "line"),
    ("zero/backend.h", r"zb_grad_slice_final\(", "line"),
    ("zero/backend.h", r"zb_round_floatX\(", "line"),
    ("zero/plan.h", r"int grad_slot;", "line"),
    ("zero/plan.h", r"int last_grad_step;", "line"),
    ("zero/plan.h", r"size_t \*slot_off;", "line"),
    ("zero/plan.h", r"^static void zero_plan_grad_slots\(", "func"),
    ("zero/rank.h", r"floatX \*grad_slots;", "line"),
    ("zero/rank.h", r"floatX \*rs_scratch;", "line"),
    ("zero/rank.h", r"float \*grad_shard;", "line"),
    ("zero/rank.h", r"int \*unit_slot;", "line"),
    ("zero/rank.h", r"int slot_next;", "line"),
    ("comm/comm.h", r"In place when recv == send \+ rank\*n", "line"),
]


DENSITY_BUDGET = 3.0


def comment_density(path):
    """Comment words and lines holding code: words inside // and /* */, strings skipped."""
    words = code = 0
    in_block = False
    for line in lines_of(path):
        comment, out, i = "", [], 0
        while i < len(line):
            if in_block:
                j = line.find("*/", i)
                if j < 0:
                    comment += " " + line[i:]; i = len(line)
                else:
                    comment += " " + line[i:j]; i = j + 2; in_block = False
                continue
            m = re.search(r'//|/\*|"', line[i:])
            if not m:
                out.append(line[i:]); break
            k = i + m.start(); out.append(line[i:k])
            if m.group() == "//":
                comment += " " + line[k + 2:]; break
            if m.group() == "/*":
                in_block = True; i = k + 2; continue
            j = k + 1
            while j < len(line) and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append(line[k:j + 1]); i = j + 1
        code += bool("".join(out).strip())
        words += len(re.findall(r"[A-Za-z0-9_']+", comment))
    return words, code


def lines_of(path):
    return open(os.path.join(ROOT, path), encoding="utf-8").read().splitlines()


def readme_path():
    """README's lines up to the section's end, and the items: [(file, stop text or None)]."""
    lines = lines_of("README.md")
    start = lines.index(SECTION)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    steps = []
    for line in lines[start:end]:
        m = re.match(r"\d+\. \*\*(.+?)\*\*", line)
        if not m:
            continue
        lead = m.group(1)
        for f in re.finditer(r"\[[^\]]*\]\(([^)#]+)[^)]*\)|`([^`]+)`(?: up to `([^`]+)`)?", lead):
            path = f.group(1) or f.group(2)
            if os.path.isfile(os.path.join(ROOT, path)):
                steps.append((path, f.group(3)))
    return end, steps, lines[start:end]


def read_order():
    """Every line read, in order, as (file, 0-based line)."""
    end, steps, _ = readme_path()
    order = [("README.md", i) for i in range(end)]
    pos = {}
    for path, stop in steps:
        text = lines_of(path)
        a = pos.get(path, 0)
        b = len(text)
        if stop is not None:
            b = next((i for i in range(a, len(text)) if stop in text[i]), None)
            if b is None:
                sys.exit(f"README sends the reader to {path} up to `{stop}`, which is not in it after line {a + 1}")
        order += [(path, i) for i in range(a, b)]
        pos[path] = b
    return order, steps


def anchor_lines(path, pattern, kind):
    text = lines_of(path)
    hits = [i for i, l in enumerate(text) if re.search(pattern, l)]
    if len(hits) != 1:
        sys.exit(f"{path}: /{pattern}/ matches {len(hits)} lines, not one")
    i = hits[0]
    if kind == "line":
        return [i]
    j = next(k for k in range(i, len(text)) if text[k] == "}")
    return list(range(i, j + 1))


def main():
    order, steps = read_order()
    at = {line: n + 1 for n, line in enumerate(order)}   # the first reading of each line
    g = anchor_lines(*GATHER, "line")[0]
    gather = at.get((GATHER[0], g))
    last, last_dep, missing = 0, None, []
    for path, pattern, kind in STAGE2:
        ls = anchor_lines(path, pattern, kind)
        reached = [at.get((path, i)) for i in ls]
        if None in reached:
            missing.append(f"{path} /{pattern}/")
            continue
        if max(reached) > last:
            last, last_dep = max(reached), f"{path} /{pattern}/"
    print("reading path: " + ", ".join(p + (f" up to `{s}`" if s else "") for p, s in steps))
    print(f"lines read before the stage-3 all-gather: {gather} (budget {GATHER_BUDGET})")
    print(f"lines read before the stage-2 reduce-scatter is understood: {last} (budget {STAGE2_BUDGET}; "
          f"the last dependency read: {last_dep})")
    bad = []
    if gather is None or gather > GATHER_BUDGET:
        bad.append(f"the stage-3 all-gather is met after {gather} lines, over {GATHER_BUDGET}")
    if missing:
        bad.append("never read: " + "; ".join(missing))
    if last > STAGE2_BUDGET:
        bad.append(f"the stage-2 reduce-scatter needs {last} lines, over {STAGE2_BUDGET}")
    n = sum(1 for l in lines_of("zero/backend.h") if re.match(r"static [^(]*\bzb_\w+\(", l))
    said = [int(x) for x in re.findall(r"(\d+) data-movement primitives", "\n".join(readme_path()[2]))]
    print(f"zero/backend.h declares {n} primitives; README says {said}")
    if said != [n]:
        bad.append(f"README's count of the primitives {said} is not zero/backend.h's {n}")
    zero_dir = sorted(f"zero/{f}" for f in os.listdir(os.path.join(ROOT, "zero")) if f.endswith((".h", ".cuh")))
    for name, files in [("zero.h", ["zero.h"]), ("zero.h and zero/", ["zero.h"] + zero_dir)]:
        w, c = map(sum, zip(*(comment_density(f) for f in files)))
        print(f"comment words per code line, {name}: {w / c:.2f} (budget {DENSITY_BUDGET:g})")
        if w / c > DENSITY_BUDGET:
            bad.append(f"{name} has {w / c:.2f} comment words per code line, over {DENSITY_BUDGET:g}")
    for b in bad:
        print("PROBLEM " + b)
    if "--check" in sys.argv and bad:
        sys.exit(1)


main()
