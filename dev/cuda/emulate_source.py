#!/usr/bin/env python3
# dev/cuda/emulate_source.py SRC DST: a CUDA header as dev/cuda/kernels_emulate.cpp compiles it on
# the CPU with g++ (dev/cuda/emu/cuda_runtime.h): the same text, line for line (a #line directive
# keeps the file's name in messages), with the two constructs C++ cannot parse rewritten:
#   kernel<<<grid, block[, smem[, stream]]>>>(args)  ->  emu_launch_kernel(grid, block, smem, stream, [&] { kernel(args); })
#   __shared__ T name[dims];                         ->  T (&name)[dims] = *emu_static_shared<T[dims]>(__PRETTY_FUNCTION__, __LINE__);
#   extern __shared__ T name[];                      ->  T *name = (T *)emu_dynamic_shared();
import re
import sys


def split_top(s):
    """s split at its commas outside parentheses, brackets and braces"""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def kernel_start(s, end):
    """where the kernel expression ending at end (before <<<) starts: a name, maybe name<...>"""
    i = end
    if s[i - 1] == ">":   # template arguments, balanced
        depth = 0
        while True:
            i -= 1
            depth += s[i] == ">"
            depth -= s[i] == "<"
            if depth == 0:
                break
    while i > 0 and (s[i - 1].isalnum() or s[i - 1] in "_:"):
        i -= 1
    return i


def rewrite_launches(s):
    while "<<<" in s:
        a = s.index("<<<")
        k0 = kernel_start(s, a)
        b = s.index(">>>", a)
        cfg = [c.strip() for c in split_top(s[a + 3:b])]
        cfg += ["0"] * (4 - len(cfg))
        p = b + 3
        while s[p].isspace():
            p += 1
        assert s[p] == "(", "a launch without arguments at %r" % s[k0:p + 20]
        depth, q = 0, p
        while True:
            depth += s[q] == "("
            depth -= s[q] == ")"
            q += 1
            if depth == 0:
                break
        call = "emu_launch_kernel(%s, %s, %s, %s, [&] { %s%s; })" % (*cfg, s[k0:a], s[p:q])
        s = s[:k0] + call + s[q:]
    return s


SHARED = re.compile(r"(extern\s+)?__shared__\s+([A-Za-z_][\w:<>, ]*?)\s+(\w+)\s*((?:\[[^\]]*\])*)\s*;")


def rewrite_shared(m):
    ext, typ, name, dims = m.group(1), m.group(2), m.group(3), m.group(4)
    if ext:
        return "%s *%s = (%s *)emu_dynamic_shared();" % (typ, name, typ)
    ref = "(&%s)%s" % (name, dims) if dims else "&%s" % name
    return "%s %s = *emu_static_shared<%s%s>(__PRETTY_FUNCTION__, __LINE__);" % (typ, ref, typ, dims)


def main():
    src, dst = sys.argv[1:3]
    s = open(src).read()
    s = SHARED.sub(rewrite_shared, rewrite_launches(s))
    with open(dst, "w") as f:
        f.write('#line 1 "%s"\n' % src + s)


if __name__ == "__main__":
    main()
