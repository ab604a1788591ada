#!/usr/bin/env python3
"""Float64 numpy reference of a BERT encoder (HF BertModel) with pooling.

Usage: reference_bert.py --model HF_DIR --input IDS_FILE --out EMB_FILE
       [--pooling mean|cls|last] [--no-normalize] [--dimensions N]

IDS_FILE: one sequence a line, comma-separated token ids (already wrapped in
[CLS] ... [SEP]). EMB_FILE: raw little-endian float32 [sequences][dim].
Written from the published architecture (BERT, Devlin et al. 2019;
sentence-transformers mean pooling): embeddings = word + position +
token_type (all type 0), LayerNorm; per layer: bidirectional multi-head
attention, residual + LayerNorm (post-LN), GELU (erf) MLP, residual +
LayerNorm. No padding: every sequence runs alone, so no attention mask.
Shares no code with the C++ model.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_model import layer_norm, read_safetensors  # noqa: E402

_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


class Bert:
    def __init__(self, path):
        with open(os.path.join(path, 'config.json')) as f:
            self.cfg = json.load(f)
        raw = read_safetensors(os.path.join(path, 'model.safetensors'))
        self.w = {}
        for k, v in raw.items():
            if k.startswith('bert.'):
                k = k[5:]
            if v.dtype.kind == 'f':
                self.w[k] = v.astype(np.float64)
        self.eps = self.cfg.get('layer_norm_eps', 1e-12)
        self.heads = self.cfg['num_attention_heads']

    def lin(self, x, name):
        return x @ self.w[name + '.weight'].T + self.w[name + '.bias']

    def ln(self, x, name):
        return layer_norm(x, self.w[name + '.weight'], self.w[name + '.bias'], self.eps)

    def hidden(self, ids):
        ids = np.asarray(ids)
        n = len(ids)
        e = 'embeddings.'
        x = (self.w[e + 'word_embeddings.weight'][ids] +
             self.w[e + 'position_embeddings.weight'][:n] +
             self.w[e + 'token_type_embeddings.weight'][0])
        x = self.ln(x, e + 'LayerNorm')
        h = x.shape[1]
        d = h // self.heads
        for i in range(self.cfg['num_hidden_layers']):
            p = 'encoder.layer.%d.' % i
            q = self.lin(x, p + 'attention.self.query').reshape(n, self.heads, d).transpose(1, 0, 2)
            k = self.lin(x, p + 'attention.self.key').reshape(n, self.heads, d).transpose(1, 0, 2)
            v = self.lin(x, p + 'attention.self.value').reshape(n, self.heads, d).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, h)
            x = self.ln(x + self.lin(a, p + 'attention.output.dense'), p + 'attention.output.LayerNorm')
            f = gelu_erf(self.lin(x, p + 'intermediate.dense'))
            x = self.ln(x + self.lin(f, p + 'output.dense'), p + 'output.LayerNorm')
        return x


def pool(hidden, pooling, normalize, dimensions):
    if pooling == 'mean':
        v = hidden.mean(axis=0)
    elif pooling == 'cls':
        v = hidden[0]
    else:
        v = hidden[-1]
    if dimensions:
        v = v[:dimensions]
    if normalize:
        v = v / max(np.linalg.norm(v), 1e-12)
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', required=True)
    ap.add_argument('--input', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--pooling', default='mean', choices=['mean', 'cls', 'last'])
    ap.add_argument('--no-normalize', action='store_true')
    ap.add_argument('--dimensions', type=int, default=0)
    args = ap.parse_args(argv)
    model = Bert(args.model)
    out = []
    with open(args.input) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            ids = [int(t) for t in line.split(',')]
            out.append(pool(model.hidden(ids), args.pooling, not args.no_normalize, args.dimensions))
    np.asarray(out, dtype='<f4').tofile(args.out)
    print(json.dumps({'sequences': len(out), 'dim': int(out[0].shape[0]) if out else 0}))


if __name__ == '__main__':
    main()
