#!/usr/bin/env python3
"""Manual check of reference_model.py against Hugging Face transformers.

Not run by any test: it needs torch and transformers, which the project venv
does not carry (CPU torch is large). Install them into a scratch venv, e.g.
  python -m venv /tmp/hfv && /tmp/hfv/bin/pip install torch transformers==5.0.0 numpy
then, on a tiny model from make_tiny_models.py:
  /tmp/hfv/bin/python hf_crosscheck.py DIR/gemma3/hf-f32 [--tokens 64] [--greedy 64]
It runs transformers in float64 with eager attention and prints the worst
per-position relative L2 difference of the prompt logits and whether the
greedy continuations (transformers' own KV cache) agree.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_model as rm  # noqa: E402


def hf_model(path):
    with open(os.path.join(path, 'config.json')) as f:
        model_type = json.load(f)['model_type']
    cls = (transformers.Gemma3ForConditionalGeneration if model_type == 'gemma3'
           else transformers.AutoModelForCausalLM)
    model = cls.from_pretrained(path, torch_dtype=torch.float64, attn_implementation='eager')
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('model', help='HF directory')
    ap.add_argument('--tokens', type=int, default=64)
    ap.add_argument('--greedy', type=int, default=64)
    ap.add_argument('--seed', type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    tokens = [int(t) for t in rng.integers(0, 299, size=args.tokens)]
    ref, _ = rm.load(args.model)
    ref_logits, ref_greedy = ref.greedy(tokens, args.greedy)
    model = hf_model(args.model)
    with torch.no_grad():
        hf_logits = model(torch.tensor([tokens])).logits[0].double().numpy()
        out = model.generate(torch.tensor([tokens]), max_new_tokens=args.greedy,
                             min_new_tokens=args.greedy, do_sample=False)
    hf_greedy = out[0, len(tokens):].tolist()
    err = (np.linalg.norm(hf_logits - ref_logits, axis=1)
           / np.linalg.norm(ref_logits, axis=1)).max()
    same = sum(a == b for a, b in zip(hf_greedy, ref_greedy))
    print(f'{args.model}: max rel L2 {err:.2e}; greedy {same}/{args.greedy} identical')
    return 0 if err < 1e-5 and hf_greedy == ref_greedy else 1


if __name__ == '__main__':
    sys.exit(main())
