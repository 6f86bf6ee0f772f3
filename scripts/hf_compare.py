#!/usr/bin/env python3
"""scripts/hf_compare.py: a zeroc export loaded by transformers itself, GPT2LMHeadModel / LlamaForCausalLM
.from_pretrained(DIR), the strongest check that model/hf.h's names and layouts are Hugging Face's. It writes a
debug state (docs/model.md) computed by the transformers model, which test_gpt_cpu compares with zeroc:
logits, loss, every gradient (mapped to zeroc's tensors through model/hf.h's table) and 10 AdamW steps.

    ./export_model CKPT DIR
    python3 scripts/hf_compare.py --init DIR/model.safetensors --train SHARD --batch 4 --seq 32 --debug-state OUT
    ./build/z0/test_gpt_cpu --state OUT --init DIR/model.safetensors

Flags are scripts/train_gpt.py's (the model comes from DIR/config.json). It also checks that
from_pretrained reported no missing, unexpected or mismatched weights, that every parameter holds the
file's bits, and prints transformers' logits against the reference's own Hugging Face layout model
(scripts/train_gpt.py HFModel). scripts/gpu_check.sh runs it for both architectures. Without
transformers it says so and exits 77 (skip).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import need_modules  # noqa: E402

need_modules.require("numpy", "torch", "transformers", status=77)   # without transformers: nothing to compare, a skip
import numpy as np  # noqa: E402
import train_gpt as R  # noqa: E402

# buffers transformers may report as not loaded: they are not parameters (model/hf.h hf_ignorable) or tied
IGNORABLE = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")


class TransformersModel(R.HFModel):
    """R.HFModel's interface (params in model/hf.h's order, padded logits, flat() and flat_grads() in zeroc's
    order) on a transformers model: its own parameters, its own forward."""

    def __init__(self, cfg, hf_model, device):
        R.Model.__init__(self, cfg, device)
        self.hf = R.hf_tensors(cfg, self.tensors)
        self.tensors = self.hf
        self.names = [h.name for h in self.hf]
        named = dict(hf_model.named_parameters())   # the tied lm_head of GPT-2 appears once, as transformer.wte.weight
        missing = [n for n in self.names if n not in named]
        extra = sorted(set(named) - set(self.names))
        if missing or extra:
            R.fatal("%s's parameters are not model/hf.h's: missing %s, extra %s" % (type(hf_model).__name__, missing[:4], extra[:4]))
        self.params = [named[n] for n in self.names]
        for h, p in zip(self.hf, self.params):
            if tuple(p.shape) != tuple(h.shape):
                R.fatal("%s: transformers has shape %s, model/hf.h %s" % (h.name, list(p.shape), list(h.shape)))
        self.model = hf_model

    def forward(self, idx, params=None, vocab=None):
        logits = self.model(input_ids=idx).logits.float()
        return logits[..., :vocab] if vocab is not None else self.pad_vocab(logits)


def load(transformers, torch, d, arch):
    cls = transformers.GPT2LMHeadModel if arch == R.ARCH_GPT2 else transformers.LlamaForCausalLM
    ver = tuple(int(x) for x in transformers.__version__.split(".")[:2] if x.isdigit())
    kw = {"dtype" if ver >= (4, 56) else "torch_dtype": torch.float32, "output_loading_info": True}
    try:
        model, info = cls.from_pretrained(d, attn_implementation="eager", **kw)
    except (TypeError, ValueError):   # versions without attn_implementation
        model, info = cls.from_pretrained(d, **kw)
    bad = {k: [n for n in info.get(k, []) if not (isinstance(n, str) and n.endswith(IGNORABLE))
               and not (arch == R.ARCH_GPT2 and n == "lm_head.weight")]
           for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if any(bad.values()):
        R.fatal("%s.from_pretrained(%s): %s" % (cls.__name__, d, "; ".join("%s %s" % (k, v[:4]) for k, v in bad.items() if v)))
    return model.float().eval()


def run(argv, transformers):
    c = R.parse_args(argv)
    if not c.init_path or not R.is_safetensors(c.init_path):
        R.fatal("--init DIR/model.safetensors (a zeroc export, config.json beside it) is required")
    if not c.debug_state:
        R.fatal("--debug-state FILE is required")
    m = c.model
    d = os.path.dirname(os.path.abspath(c.init_path))
    arrays = R.load_hf(c.init_path, m)   # zeroc's reading of the same file (model/hf.h's rules)
    loader = R.DataLoader(c.train_path, c.B * c.world, c.T, m.vocab_size)
    torch = R.load_torch()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if c.threads > 0:
        torch.set_num_threads(c.threads)
    model = load(transformers, torch, d, m.arch).to(c.device)
    cfg = model.config
    theta = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
    print("transformers %s, torch %s: %s from %s (%s)" % (transformers.__version__, torch.__version__, type(model).__name__, d,
          "n_layer %d, n_head %d, n_embd %d, vocab %d" % (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size)
          if m.arch == R.ARCH_GPT2 else "layers %d, heads %d/%d, hidden %d, intermediate %d, vocab %d, rope_theta %s, rms_norm_eps %g"
          % (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size, cfg.intermediate_size,
             cfg.vocab_size, theta, cfg.rms_norm_eps)), flush=True)
    if m.arch == R.ARCH_LLAMA and theta is not None and np.float32(theta) != np.float32(m.rope_theta):
        R.fatal("transformers read rope_theta %s from config.json, zeroc %s" % (theta, m.rope_theta))
    tm = TransformersModel(m, model, c.device)
    differ = [h.name for h, p in zip(tm.hf, tm.params) if not np.array_equal(p.detach().cpu().numpy(), arrays[h.name])]
    if differ:
        R.fatal("transformers holds other values than the file for %s" % differ[:4])
    print("%d parameter tensors loaded bit for bit, under the names and shapes of model/hf.h" % len(tm.params))
    ref = R.HFModel(m, arrays, c.device)
    x, _ = loader.next()
    loader.reset()
    xi = R.to_device(x, c.device)
    with torch.no_grad():
        a = tm.forward(xi)[..., :m.vocab_size].cpu().numpy()
        b = ref.forward(xi)[..., :m.vocab_size].cpu().numpy()
    diff = float(np.max(np.abs(a - b)))
    print("logits of transformers vs the reference's Hugging Face layout (scripts/train_gpt.py HFModel): max abs %.3e, rel %.3e"
          % (diff, diff / float(np.max(np.abs(b)))), flush=True)
    R.write_debug_state(c, tm, loader, c.device, print)
    print("now: ./build/z0/test_gpt_cpu --state %s --init %s  (zeroc against transformers)" % (c.debug_state, c.init_path))
    return 0


def main():
    import transformers
    try:
        return run(sys.argv, transformers)
    except R.Fatal as e:
        sys.stdout.flush()
        print("error: %s" % e, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
