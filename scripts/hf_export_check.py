#!/usr/bin/env python3
"""scripts/hf_export_check.py: an ./export_model folder loaded whole by transformers, AutoTokenizer and
AutoModelForCausalLM.from_pretrained(DIR), and its greedy continuations compared with zeroc's on the
same weights. Exits 0 when they agree, 1 on a difference, 77 (skip) without transformers.

    ./export_model CKPT DIR
    ./train_gpt_cpu --sample 1 --init DIR/model.safetensors --temperature 0 --sample-len 32 \\
        --prompt "The jury said" --quiet 1 > z1.txt                   # one file per prompt
    python3 scripts/hf_export_check.py DIR --sample-len 32 --prompt "The jury said" z1.txt [--prompt P z2.txt ...]

Each zeroc file is what --quiet 1 prints: the prompt and its continuation, then a newline. Like
zeroc, transformers starts from <|endoftext|>, then the prompt's tokens, and takes the argmax
(the lowest id among equal logits) --sample-len times; nothing stops at <|endoftext|>. The
continuations are compared byte for byte. A first difference where transformers' two best logits
are within --tie (default 1e-3) of each other is a near tie that rounding decides: reported, not
counted, and the rest of that prompt is not compared.

Also checked: the tokenizer is GPT-2's (<|endoftext|> is 50256 and eos, "Hello world" is
[15496, 995], decode(encode(x)) == x), and from_pretrained reported no missing or unexpected weights.
--device cpu (default: fp32, closest to train_gpt_cpu) or cuda.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import need_modules  # noqa: E402

need_modules.require("torch", "transformers", status=77)
import torch  # noqa: E402
import transformers  # noqa: E402

EOT = "<|endoftext|>"


def fail(msg):
    print("error: " + msg, file=sys.stderr)
    sys.exit(1)


def parse(argv):
    usage = "usage: hf_export_check.py DIR --sample-len N --prompt TEXT ZEROC_OUT [--prompt TEXT ZEROC_OUT ...] [--device cpu|cuda] [--tie X]"
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() if argv else usage)
        sys.exit(0 if argv else 1)
    d, n, device, tie, pairs = argv[0], None, "cpu", 1e-3, []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--prompt":
            if i + 2 >= len(argv):
                fail("--prompt: expected TEXT and zeroc's output file")
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
            continue
        if a not in ("--sample-len", "--device", "--tie") or i + 1 >= len(argv):
            fail("unexpected argument '%s' (%s)" % (a, usage))
        v = argv[i + 1]
        try:
            if a == "--sample-len":
                n = int(v)
            elif a == "--tie":
                tie = float(v)
            else:
                device = v
        except ValueError:
            fail("%s: expected a number, got '%s'" % (a, v))
        i += 2
    if n is None or n < 1 or not pairs:
        fail(usage)
    if device not in ("cpu", "cuda"):
        fail("--device: expected cpu or cuda, got '%s'" % device)
    return d, n, device, tie, pairs


def load(d, device):
    tok = transformers.AutoTokenizer.from_pretrained(d)
    ver = tuple(int(x) for x in transformers.__version__.split(".")[:2] if x.isdigit())
    kw = {"dtype" if ver >= (4, 56) else "torch_dtype": torch.float32, "output_loading_info": True}
    model, info = transformers.AutoModelForCausalLM.from_pretrained(d, **kw)
    ignorable = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq", "lm_head.weight")   # buffers, GPT-2's tied head
    bad = {k: [n for n in info.get(k, []) if not str(n).endswith(ignorable)] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(bad.values()):
        fail("AutoModelForCausalLM.from_pretrained(%s): %s" % (d, "; ".join("%s %s" % (k, v[:4]) for k, v in bad.items() if v)))
    print("transformers %s: AutoTokenizer -> %s, AutoModelForCausalLM -> %s (%d parameters)"
          % (transformers.__version__, type(tok).__name__, type(model).__name__, sum(p.numel() for p in model.parameters())))
    return tok, model.float().to(device).eval()


def check_tokenizer(tok):
    eot = tok.convert_tokens_to_ids(EOT)
    if eot != 50256 or tok.eos_token != EOT or len(tok) != 50257:
        fail("the tokenizer is not GPT-2's: %s is %s, eos %r, %d tokens" % (EOT, eot, tok.eos_token, len(tok)))
    ids = tok("Hello world", add_special_tokens=False)["input_ids"]
    if ids != [15496, 995]:
        fail("the tokenizer encodes 'Hello world' as %s, GPT-2 as [15496, 995]" % ids)
    text = "It's 2024: caf\u00e9, \u4e2d\u6587,  two  spaces\n"
    back = tok.decode(tok(text, add_special_tokens=False)["input_ids"])
    if back != text:
        fail("the tokenizer's decode(encode(%r)) is %r" % (text, back))
    print("tokenizer: GPT-2's (%s = 50256 = eos, 'Hello world' = [15496, 995], decode(encode(x)) == x)" % EOT)


def token_bytes(tok, cache={}):
    """id -> its bytes, from the token's text in GPT-2's bytes_to_unicode spelling (vocab.json's)"""
    if not cache:
        bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
        cs, n = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        cache["decoder"] = {chr(c): b for b, c in zip(bs, cs)}
    dec = cache["decoder"]

    def f(i):
        t = tok.convert_ids_to_tokens(i)
        return t.encode() if t == EOT else bytes(dec[c] for c in t)
    return f


def greedy(model, ids, n, device):
    """n argmax steps after ids; returns the new ids and, per step, the gap between the two best logits"""
    out, gaps = [], []
    x = torch.tensor([ids], device=device)
    past = None
    with torch.no_grad():
        for _ in range(n):
            r = model(input_ids=x, past_key_values=past, use_cache=True)
            past = r.past_key_values
            logits = r.logits[0, -1].float()
            top = torch.topk(logits, 2)
            nxt = int(torch.argmax(logits))   # the first of equal maxima: the lowest id, as zeroc
            gaps.append(float(top.values[0] - top.values[1]))
            out.append(nxt)
            x = torch.tensor([[nxt]], device=device)
    return out, gaps


def main():
    d, n, device, tie, pairs = parse(sys.argv[1:])
    tok, model = load(d, device)
    check_tokenizer(tok)
    to_bytes = token_bytes(tok)
    eot = tok.convert_tokens_to_ids(EOT)
    bad = 0
    for k, (prompt, path) in enumerate(pairs, 1):
        try:
            z = open(path, "rb").read()
        except OSError as e:
            fail("%s: cannot read (%s)" % (path, e.strerror))
        if z.endswith(b"\n"):
            z = z[:-1]
        p = prompt.encode()
        if not z.startswith(p):
            fail("%s does not start with the prompt %r: is it zeroc's --sample 1 --quiet 1 output for it?" % (path, prompt))
        ids = [eot] + tok(prompt, add_special_tokens=False)["input_ids"]
        if b"".join(to_bytes(i) for i in ids[1:]) != p:
            fail("prompt %d: the tokenizer's tokens of %r do not spell it back" % (k, prompt))
        new, gaps = greedy(model, ids, n, device)
        got, at, j = p, len(p), None
        for step, i in enumerate(new):
            got += to_bytes(i)
            if not z.startswith(got):
                j = step
                break
        if got == z:
            print("prompt %d %r: %d tokens, transformers = zeroc: %r" % (k, prompt, n, z[at:].decode("utf-8", "replace")))
            continue
        if j is None:
            fail("prompt %d: zeroc's %s has %d bytes more than transformers' %d tokens: was --sample-len %d?" % (k, path, len(z) - len(got), n, n))
        say = "prompt %d %r: token %d of %d differs (transformers %d %r; zeroc continues %r), the two best logits %.2e apart" % (
            k, prompt, j + 1, n, new[j], to_bytes(new[j]), z[len(got) - len(to_bytes(new[j])):][:16], gaps[j])
        if gaps[j] <= tie:
            print(say + ": a near tie (within --tie %g), not counted" % tie)
        else:
            print("MISMATCH " + say)
            bad += 1
    print("%d of %d prompts differ" % (bad, len(pairs)) if bad else "all %d prompts: transformers continues as zeroc does" % len(pairs))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
