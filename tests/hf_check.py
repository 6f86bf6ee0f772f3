#!/usr/bin/env python3
"""tests/hf_check.py: the Python side of tests/test_safetensors.sh (numpy, and torch for `logits`).

    names DIR ARCH L H KV C F V T     DIR/model.safetensors + config.json are what transformers expects of
                                      GPT2LMHeadModel / LlamaForCausalLM with these sizes: every name and shape
                                      (listed here from the transformers model definitions, not from model/hf.h), one
                                      dtype, 8-byte aligned data, __metadata__ format pt, the config.json keys
    bf16 DIR32 DIR16                  every BF16 value is its F32 value rounded to nearest even
    widened DIR16 DIR32               DIR32's F32 values are exactly DIR16's BF16 or F16 values, widened
    logits STATE DIR:LO:HI[:BREAK]:WHAT ...
                                      the HF-layout model of scripts/train_gpt.py on DIR vs the logits in the debug
                                      state STATE (zeroc's, to fp32 rounding): rel error must lie in [LO, HI];
                                      BREAK rope stores q/k without the RoPE permutation (llama), conv1d one Conv1D
                                      weight in Linear layout (gpt2): the negative controls. Prints one check line
                                      per spec ("  ok   WHAT" / "  FAIL WHAT"); the exit status counts the failures
    openai DIR OUT                    DIR (an fp32 gpt2 export) named as OpenAI's GPT-2 checkpoint on the Hub is:
                                      no transformer. prefix, attn.bias / attn.masked_bias buffers, sorted names,
                                      OpenAI's config.json keys
    edit DIR OUT OP [ARGS]            a (damaged) copy: copy, to-f16, truncate-header, bad-json, dtype NAME DT, drop NAME,
                                      add NAME, shape NAME (stored transposed), gap
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import train_gpt as R  # noqa: E402


def read(path):
    """(header dict, header length N, data bytes) of a safetensors file, no checks."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        return header, n, f.read()


def write(path, tensors, metadata={"format": "pt"}, header_text=None):
    """tensors: [(name, dtype, shape, raw bytes)], laid out back to back (a second writer, for tests)."""
    header, off = {"__metadata__": metadata}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = header_text if header_text is not None else json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def tensors_of(path):
    header, _, data = read(path)
    out = []
    for name, e in sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
        b, en = e["data_offsets"]
        out.append((name, e["dtype"], e["shape"], data[b:en]))
    return out


def expected_names(arch, L, H, KV, C, F, V, T):
    """The state dict of transformers' GPT2LMHeadModel / LlamaForCausalLM (parameters; lm_head tied in gpt2)."""
    if arch == "gpt2":
        out = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [T, C],
               "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
        for l in range(L):
            p = "transformer.h.%d." % l
            out.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "attn.c_attn.weight": [C, 3 * C],
                        p + "attn.c_attn.bias": [3 * C], p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                        p + "ln_2.weight": [C], p + "ln_2.bias": [C], p + "mlp.c_fc.weight": [C, F], p + "mlp.c_fc.bias": [F],
                        p + "mlp.c_proj.weight": [F, C], p + "mlp.c_proj.bias": [C]})
        return out
    hd = C // H
    out = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C], "lm_head.weight": [V, C]}
    for l in range(L):
        p = "model.layers.%d." % l
        out.update({p + "input_layernorm.weight": [C], p + "self_attn.q_proj.weight": [H * hd, C],
                    p + "self_attn.k_proj.weight": [KV * hd, C], p + "self_attn.v_proj.weight": [KV * hd, C],
                    p + "self_attn.o_proj.weight": [C, H * hd], p + "post_attention_layernorm.weight": [C],
                    p + "mlp.gate_proj.weight": [F, C], p + "mlp.up_proj.weight": [F, C], p + "mlp.down_proj.weight": [C, F]})
    return out


def cmd_names(d, arch, L, H, KV, C, F, V, T):
    L, H, KV, C, F, V, T = map(int, (L, H, KV, C, F, V, T))
    path = os.path.join(d, "model.safetensors")
    header, n, data = read(path)
    R.read_safetensors(path)  # the format's own rules (tiling, sizes)
    want = expected_names(arch, L, H, KV, C, F, V, T)
    got = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
    dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    errors = []
    if set(got) != set(want):
        errors.append("names: missing %s, unexpected %s" % (sorted(set(want) - set(got))[:4], sorted(set(got) - set(want))[:4]))
    errors += ["%s: shape %s, transformers has %s" % (k, got[k], want[k]) for k in want if k in got and got[k] != want[k]]
    if len(dtypes) != 1:
        errors.append("dtypes %s" % dtypes)
    if (8 + n) % 8:
        errors.append("data starts at byte %d, not 8-byte aligned" % (8 + n))
    if header.get("__metadata__", {}).get("format") != "pt":
        errors.append("__metadata__.format is not pt (transformers refuses the file)")
    cfg = json.load(open(os.path.join(d, "config.json")))
    if arch == "gpt2":
        want_cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C,
                    "n_inner": F, "vocab_size": V, "n_positions": T, "activation_function": "gelu_new",
                    "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    else:
        want_cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": L,
                    "num_attention_heads": H, "num_key_value_heads": KV, "hidden_size": C, "intermediate_size": F,
                    "vocab_size": V, "max_position_embeddings": T, "hidden_act": "silu", "rms_norm_eps": 1e-5,
                    "rope_theta": 10000.0, "tie_word_embeddings": False}
    errors += ["config.json %s: %r, expected %r" % (k, cfg.get(k), v) for k, v in want_cfg.items() if cfg.get(k) != v]
    print("       %d tensors, all %s, data at byte %d; config.json %s" % (len(got), dtypes.pop() if len(dtypes) == 1 else "?",
                                                                        8 + n, ", ".join("%s=%s" % kv for kv in list(want_cfg.items())[2:7])))
    for e in errors:
        print("       " + e)
    return not errors


def rne_bf16(a):
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def cmd_bf16(d32, d16):
    a = {t[0]: t for t in tensors_of(os.path.join(d32, "model.safetensors"))}
    b = {t[0]: t for t in tensors_of(os.path.join(d16, "model.safetensors"))}
    bad, n, changed = [], 0, 0
    for name, (_, dt, shape, raw) in b.items():
        f = np.frombuffer(a[name][3], "<f4")
        h = np.frombuffer(raw, "<u2")
        if dt != "BF16" or shape != a[name][2] or not np.array_equal(h, rne_bf16(f)):
            bad.append(name)
        n += h.size
        changed += int(np.count_nonzero((h.astype(np.uint32) << 16) != f.view(np.uint32)))
    cfg = json.load(open(os.path.join(d16, "config.json")))
    print("       %d tensors, %d values: each is its fp32 value rounded to nearest even (%d of them inexact); torch_dtype %s"
          % (len(b), n, changed, cfg.get("torch_dtype")))
    for name in bad[:4]:
        print("       %s: not the RNE rounding of the fp32 export" % name)
    return not bad and len(b) == len(a) and changed > 0 and cfg.get("torch_dtype") == "bfloat16"


def widen(dtype, raw):
    """BF16 or F16 bytes as the float32 bit patterns they stand for (numpy's own conversions)."""
    if dtype == "BF16":
        return np.frombuffer(raw, "<u2").astype(np.uint32) << 16
    return np.frombuffer(raw, "<f2").astype(np.float32).view(np.uint32)


def cmd_widened(d16, d32):
    a = {t[0]: t for t in tensors_of(os.path.join(d16, "model.safetensors"))}
    b = {t[0]: t for t in tensors_of(os.path.join(d32, "model.safetensors"))}
    bad = [k for k in a if k not in b or not np.array_equal(np.frombuffer(b[k][3], "<u4"), widen(a[k][1], a[k][3]))]
    dtypes = {t[1] for t in a.values()}
    sub = sum(int(np.count_nonzero((np.frombuffer(t[3], "<u2") & 0x7C00) == 0) - np.count_nonzero((np.frombuffer(t[3], "<u2") & 0x7FFF) == 0))
              for t in a.values() if t[1] == "F16")
    print("       %d tensors: imported %s values exported again as fp32 are exactly those values%s%s"
          % (len(a), "/".join(sorted(dtypes)), " (%d F16 subnormals among them)" % sub if "F16" in dtypes else "",
             "" if not bad else ", except " + ", ".join(bad[:4])))
    return not bad and set(a) == set(b) and ("F16" not in dtypes or sub > 0)


def cmd_logits(state, *specs):
    with open(state, "rb") as f:
        h = np.frombuffer(f.read(1024), "<i4")
        B, T, Vp = int(h[2]), int(h[3]), int(h[4])
        inputs = np.frombuffer(f.read(4 * B * T), "<i4").reshape(B, T)
        f.read(4 * B * T)
        ref = np.frombuffer(f.read(4 * B * T * Vp), "<f4").reshape(B, T, Vp)
    fails = 0
    for spec in specs:
        d, lo, hi, brk, what = spec.split(":", 4)
        ok = logits_check(d, inputs, ref, float(lo), float(hi), brk or None)
        print("  %s %s" % ("ok  " if ok else "FAIL", what), flush=True)
        fails += not ok
    return fails


def logits_check(d, inputs, ref, lo, hi, brk):
    path = os.path.join(d, "model.safetensors")
    m, _ = R.read_hf_config(os.path.join(d, "config.json"))
    arrays = R.load_hf(path, m)
    if brk == "rope":   # q/k stored in zeroc's interleaved row order under Hugging Face's names
        for h in R.hf_tensors(m, R.build_layout(m)[0]):
            if h.rope_hd:
                arrays[h.name] = h.to_zeroc(arrays[h.name])
    elif brk == "conv1d":  # one Conv1D weight stored as a Linear's (square, so the shape still fits)
        k = "transformer.h.0.attn.c_proj.weight"
        arrays[k] = np.ascontiguousarray(arrays[k].T)
    ref = ref[..., :m.vocab_size]
    R.load_torch()
    import torch
    model = R.HFModel(m, arrays)
    with torch.no_grad():
        got = model.forward(torch.from_numpy(inputs.astype(np.int64))).numpy()[..., :m.vocab_size]
    diff = float(np.max(np.abs(got - ref)))
    rel = diff / float(np.max(np.abs(ref)))
    ok = lo <= rel <= hi
    print("       logits max abs %.3e, rel %.3e (%s: must be in [%g, %g])" % (diff, rel, brk or "as exported", lo, hi))
    return ok


def cmd_openai(d, out):
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(d, "config.json")))
    L, T = cfg["n_layer"], cfg["n_positions"]
    ts = [(name[len("transformer."):], dt, shape, raw) for name, dt, shape, raw in tensors_of(os.path.join(d, "model.safetensors"))]
    causal = np.tril(np.ones((T, T), np.float32)).reshape(1, 1, T, T)
    for l in range(L):
        ts.append(("h.%d.attn.bias" % l, "F32", [1, 1, T, T], causal.tobytes()))
        ts.append(("h.%d.attn.masked_bias" % l, "F32", [], np.array(-1e4, np.float32).tobytes()))
    ts.sort(key=lambda t: t[0])
    write(os.path.join(out, "model.safetensors"), ts)
    openai = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": cfg["n_embd"], "n_head": cfg["n_head"],
              "n_layer": L, "n_positions": T, "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
              "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
              "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": cfg["vocab_size"]}
    json.dump(openai, open(os.path.join(out, "config.json"), "w"), indent=2)
    print("       %d tensors named as in OpenAI's GPT-2 (wte.weight, h.0.attn.c_attn.weight, ..., %d attn.bias/masked_bias buffers)"
          % (len(ts), 2 * L))
    return True


def cmd_edit(d, out, op, *args):
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(d, "config.json"), os.path.join(out, "config.json"))
    src, dst = os.path.join(d, "model.safetensors"), os.path.join(out, "model.safetensors")
    ts = tensors_of(src)
    if op == "copy":
        write(dst, ts)
    elif op == "to-f16":
        write(dst, [(n, "F16", s, np.frombuffer(r, "<f4").astype("<f2").tobytes()) for n, dt, s, r in ts])
    elif op == "truncate-header":
        raw = open(src, "rb").read()
        open(dst, "wb").write(raw[:40])
    elif op == "bad-json":
        write(dst, ts, header_text=b'{"transformer.wte.weight": {"dtype": "F32", "shape": [1, 2]')
    elif op == "dtype":
        write(dst, [(n, args[1] if n == args[0] else dt, s, r) for n, dt, s, r in ts])
    elif op == "drop":
        write(dst, [t for t in ts if t[0] != args[0]])
    elif op == "add":
        write(dst, ts + [(args[0], "F32", [4], np.zeros(4, np.float32).tobytes())])
    elif op == "shape":
        write(dst, [(n, dt, s[::-1] if n == args[0] else s, r) for n, dt, s, r in ts])
    elif op == "nan":   # one element of a tensor (F32) set to NaN
        write(dst, [(n, dt, s, r[:4 * int(args[1])] + struct.pack("<f", float("nan")) + r[4 * int(args[1]) + 4:] if n == args[0] else r)
                    for n, dt, s, r in ts])
    elif op == "tied-head":   # a tied head stored anyway: the embedding's copy, or with one element changed
        wte = [t for t in ts if t[0] == args[0]][0]
        r = wte[3] if args[1] == "same" else struct.pack("<f", 1.5) + wte[3][4:]
        write(dst, ts + [("lm_head.weight", wte[1], wte[2], r)])
    elif op == "gap":
        write(dst, ts)
        header, n, data = read(dst)
        first = min((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
        header[first]["data_offsets"] = [4, header[first]["data_offsets"][1] + 4]
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        open(dst, "wb").write(struct.pack("<Q", len(text)) + text + b"\0" * 4 + data)
    else:
        raise SystemExit("unknown edit " + op)
    return True


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "logits":
            sys.exit(min(cmd_logits(*args), 100))
        fn = {"names": cmd_names, "bf16": cmd_bf16, "widened": cmd_widened, "openai": cmd_openai, "edit": cmd_edit}[cmd]
        sys.exit(0 if fn(*args) else 1)
    except R.Fatal as e:
        print("       error: %s" % e)
        sys.exit(1)
