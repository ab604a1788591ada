#!/usr/bin/env python3
"""Compares two logits files position by position (and greedy continuations).

Why: the C++ engine and reference_model.py each write logits for the same
prompt; this is the single place that decides whether they agree, so the
metric and threshold are defined once (README.md documents the file format).

  python compare_logits.py CANDIDATE REFERENCE [--threshold 1e-3]
                           [--greedy-a 1,2,3] [--greedy-b 1,2,3]

Per position p: rel_l2[p] = ||a[p] - b[p]||_2 / ||b[p]||_2 (b = REFERENCE),
max_abs[p] = max |a[p] - b[p]|, and whether the argmax agrees. Exit status:
0 all positions within threshold and greedy continuations equal; 1 a
position exceeds the threshold or the greedy continuations differ; 2 the
files cannot be read or have different shapes.

Files: FILE.npy (numpy, float32/float64 [n, vocab]) or a raw little-endian
float32 FILE with a sidecar FILE.json {"shape": [n, vocab], "dtype":
"float32"}. A sidecar (also optional beside a .npy) may carry "greedy":
[ids...]; --greedy-a/--greedy-b override it.
"""

import argparse
import json
import os
import sys

import numpy as np


def read_sidecar(path):
    side = path + '.json'
    if os.path.exists(side):
        with open(side) as f:
            return json.load(f)
    return {}


def read_logits(path):
    """Returns (float64 array [n, vocab], sidecar dict)."""
    meta = read_sidecar(path)
    if path.endswith('.npy'):
        arr = np.load(path)
    else:
        if 'shape' not in meta:
            raise ValueError(f'{path}: raw logits need a {path}.json sidecar with "shape"')
        dtype = {'float32': '<f4', 'float64': '<f8'}[meta.get('dtype', 'float32')]
        arr = np.fromfile(path, dtype=dtype)
        shape = tuple(int(s) for s in meta['shape'])
        if arr.size != int(np.prod(shape)):
            raise ValueError(f'{path}: {arr.size} values but shape {shape}')
        arr = arr.reshape(shape)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f'{path}: expected [n, vocab], got {arr.shape}')
    return arr.astype(np.float64), meta


def compare(a, b):
    """Per-position metrics of candidate a against reference b."""
    diff = a - b
    denom = np.maximum(np.linalg.norm(b, axis=1), 1e-30)
    return {'rel_l2': np.linalg.norm(diff, axis=1) / denom,
            'max_abs': np.abs(diff).max(axis=1),
            'argmax_a': a.argmax(axis=1), 'argmax_b': b.argmax(axis=1)}


def parse_ids(s):
    return [int(t) for t in s.split(',') if t.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('candidate')
    ap.add_argument('reference')
    ap.add_argument('--threshold', type=float, default=1e-3,
                    help='max allowed per-position relative L2 error')
    ap.add_argument('--greedy-a', help='candidate greedy ids (overrides sidecar)')
    ap.add_argument('--greedy-b', help='reference greedy ids (overrides sidecar)')
    ap.add_argument('--quiet', action='store_true', help='only print the summary')
    args = ap.parse_args(argv)

    try:
        a, meta_a = read_logits(args.candidate)
        b, meta_b = read_logits(args.reference)
    except (OSError, ValueError, KeyError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    if a.shape != b.shape:
        print(f'error: shape mismatch {a.shape} vs {b.shape}', file=sys.stderr)
        return 2

    m = compare(a, b)
    if not args.quiet:
        print('pos   rel_l2      max_abs     argmax(cand/ref)')
        for p in range(a.shape[0]):
            flag = '  FAIL' if m['rel_l2'][p] > args.threshold else ''
            print(f'{p:<5d} {m["rel_l2"][p]:.3e}   {m["max_abs"][p]:.3e}   '
                  f'{m["argmax_a"][p]}/{m["argmax_b"][p]}{flag}')
    n_bad = int((m['rel_l2'] > args.threshold).sum())
    ok = n_bad == 0
    print(f'positions={a.shape[0]} vocab={a.shape[1]} '
          f'max_rel_l2={m["rel_l2"].max():.3e} mean_rel_l2={m["rel_l2"].mean():.3e} '
          f'max_abs={m["max_abs"].max():.3e} '
          f'argmax_agree={int((m["argmax_a"] == m["argmax_b"]).sum())}/{a.shape[0]} '
          f'over_threshold={n_bad} threshold={args.threshold:g}')

    ga = parse_ids(args.greedy_a) if args.greedy_a else meta_a.get('greedy')
    gb = parse_ids(args.greedy_b) if args.greedy_b else meta_b.get('greedy')
    if ga is not None and gb is not None:
        first = next((i for i, (x, y) in enumerate(zip(ga, gb)) if x != y), None)
        if first is None and len(ga) != len(gb):
            first = min(len(ga), len(gb))
        if first is None:
            print(f'greedy: {len(ga)} tokens identical')
        else:
            ok = False
            print(f'greedy: DIFFER at step {first}: cand={ga} ref={gb}')
    print('PASS' if ok else 'FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
