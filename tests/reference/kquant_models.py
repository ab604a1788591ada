#!/usr/bin/env python3
"""K-quant GGUF files for the K-quant parity tests, made with numpy only.

Why: the `gguf` package dequantizes every K-quant but quantizes none, and the
tests may not depend on llama.cpp's llama-quantize (a bench-only build). This
script quantizes to Q2_K, Q4_K, Q5_K and Q6_K with simple min/max rules (not
llama.cpp's optimized search: the files only need to be valid and close to
their floats; the reference reads whatever blocks they hold), byte for byte
in ggml's block layouts, and checks each tensor against
gguf.quants.dequantize.

  # The default model (or any Llama-family GGUF) re-quantized the way
  # llama.cpp's Q4_K_M does it (Q4_K, Q6_K for the output and a share of
  # attn_v / ffn_down, Q5_0 / Q8_0 for rows that are not a multiple of 256):
  python kquant_models.py requantize IN.gguf OUT.gguf [--scheme q4_k_m|mixed_k]
  # A tiny random Llama (hidden 256, so every matrix can be a K-quant) with
  # its matrices in Q2_K, Q4_K, Q5_K and Q6_K (--scheme mixed_k), plus its F32 form:
  python kquant_models.py tiny OUT_DIR --seed N
"""

import argparse
import os
import sys

import numpy as np

import gguf

QK_K = 256
T = gguf.GGMLQuantizationType


def _f16_bytes(v):
    return np.ascontiguousarray(v.astype(np.float16)).view(np.uint8).reshape(-1, 2)


def _safe_div(a, b):
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0.0)


def _scale_min_k(xs, qmax, smax=63):
    """Per sub-block (xs: [n, sub-blocks, columns], e.g. [n, 8, 32]): scales
    and mins of up to smax (6 bits; Q2_K: 4) under f16 super-block d / dmin,
    and the integers. Returns d, dmin, sc, mn, q."""
    lo = np.minimum(xs.min(-1), 0.0)
    scale = (xs.max(-1) - lo) / qmax
    mins = -lo
    d = (scale.max(-1) / smax).astype(np.float16)
    dmin = (mins.max(-1) / smax).astype(np.float16)
    df = d.astype(np.float32)[:, None]
    dminf = dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, df)), 0, smax).astype(np.uint8)
    mn = np.clip(np.rint(_safe_div(mins, dminf)), 0, smax).astype(np.uint8)
    de = (df * sc)[..., None]
    me = (dminf * mn)[..., None]
    q = np.clip(np.rint(_safe_div(xs + me, de)), 0, qmax).astype(np.uint8)
    return d, dmin, sc, mn, q


def _pack_scales_k4(sc, mn):
    """The 12 bytes GetScaleMinK4 (quant_types.h) decodes."""
    out = np.zeros((sc.shape[0], 12), np.uint8)
    out[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    out[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:] & 0xF) | ((mn[:, 4:] & 0xF) << 4)
    return out


def quantize_q4_k(x):
    n = x.size // QK_K
    d, dmin, sc, mn, q = _scale_min_k(x.reshape(n, 8, 32), 15)
    # Byte 32 c + l: sub-block 2c's weight l (low nibble), 2c + 1's (high).
    qs = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, 128)
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack_scales_k4(sc, mn), qs], 1)


def quantize_q5_k(x):
    n = x.size // QK_K
    d, dmin, sc, mn, q = _scale_min_k(x.reshape(n, 8, 32), 31)
    low = q & 0xF
    qs = (low[:, 0::2] | (low[:, 1::2] << 4)).reshape(n, 128)
    # qh[l] bit j: the 5th bit of sub-block j's weight l.
    qh = np.zeros((n, 32), np.uint8)
    for j in range(8):
        qh |= ((q[:, j, :] >> 4) & 1) << j
    return np.concatenate([_f16_bytes(d), _f16_bytes(dmin), _pack_scales_k4(sc, mn), qh, qs], 1)


def quantize_q6_k(x):
    n = x.size // QK_K
    xs = x.reshape(n, 16, 16)
    s = np.abs(xs).max(-1) / 31
    d = (s.max(-1) / 127).astype(np.float16)
    df = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(s, df)), -128, 127).astype(np.int8)
    de = (df * sc)[..., None]
    u = (np.clip(np.rint(_safe_div(xs, de)), -32, 31) + 32).astype(np.uint8).reshape(n, 2, 128)
    # Per 128-half h and l < 32: ql[64h + l] holds weights l (low) and l + 64
    # (high), ql[64h + 32 + l] weights l + 32 and l + 96; qh[32h + l] their
    # top 2 bits in that order (quant_types.cc's DequantQ6_K).
    a, b, c, e = (u[:, :, 32 * k:32 * (k + 1)] for k in range(4))
    ql = np.concatenate([(a & 0xF) | ((c & 0xF) << 4), (b & 0xF) | ((e & 0xF) << 4)], 2)
    qh = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    return np.concatenate(
        [ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8), _f16_bytes(d)], 1)


def quantize_q2_k(x):
    n = x.size // QK_K
    # 16-column sub-blocks, 4-bit scales and mins.
    d, dmin, sc, mn, q = _scale_min_k(x.reshape(n, 16, 16), 3, smax=15)
    # Weight 128 h + 32 k + l sits in bits 2k of qs[32 h + l] (quant_types.cc's
    # DequantQ2_K); scales[i] = sc | mn << 4 for the i-th 16 columns.
    u = q.reshape(n, 2, 4, 32)
    qs = u[:, :, 0] | (u[:, :, 1] << 2) | (u[:, :, 2] << 4) | (u[:, :, 3] << 6)
    return np.concatenate(
        [sc | (mn << 4), qs.reshape(n, 64), _f16_bytes(d), _f16_bytes(dmin)], 1)


QUANTIZERS = {T.Q2_K: quantize_q2_k, T.Q4_K: quantize_q4_k, T.Q5_K: quantize_q5_k,
              T.Q6_K: quantize_q6_k}
# llama.cpp's fallbacks for rows that are not a multiple of 256.
FALLBACK = {T.Q2_K: T.Q4_0, T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}
# Round-trip error a correct packing stays under (2 bits are coarse); a
# packing mistake reads back as noise (error ~1).
MAX_ROUND_TRIP_ERROR = {T.Q2_K: 0.6}


def quantize(arr, qtype):
    """[rows, cols] float32 -> ([rows, bytes] uint8, the type used)."""
    rows, cols = arr.shape
    if cols % QK_K != 0:
        qtype = FALLBACK[qtype]
        return gguf.quants.quantize(arr, qtype), qtype
    blocks = QUANTIZERS[qtype](np.ascontiguousarray(arr, np.float32).reshape(-1))
    data = blocks.reshape(rows, -1)
    back = gguf.quants.dequantize(data, qtype).reshape(rows, cols)
    err = np.linalg.norm(back - arr) / max(np.linalg.norm(arr), 1e-30)
    if not err < MAX_ROUND_TRIP_ERROR.get(qtype, 0.2):
        raise ValueError(f'{qtype.name} round trip error {err:.3f}')
    return data, qtype


def use_more_bits(i, n):
    """llama.cpp's rule for the layers that get more bits in _M mixes."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def choose_type(name, n_layers, tied, scheme):
    if scheme == 'mixed_k':
        # Every K type (Q2_K too) across the layers' matrices.
        if name == 'token_embd.weight' or name == 'output.weight':
            return T.Q6_K
        kinds = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down']
        layer = int(name.split('.')[1])
        kind = name.split('.')[2]
        return (T.Q4_K, T.Q5_K, T.Q6_K, T.Q2_K)[(kinds.index(kind) + layer) % 4]
    if name == 'output.weight' or (tied and name == 'token_embd.weight'):
        return T.Q6_K
    if name.startswith('blk.') and name.split('.')[2] in ('attn_v', 'ffn_down'):
        return T.Q6_K if use_more_bits(int(name.split('.')[1]), n_layers) else T.Q4_K
    return T.Q4_K


def requantize(src, dst, scheme='q4_k_m'):
    """Copies src's metadata; its 2-D tensors dequantized and re-quantized."""
    reader = gguf.GGUFReader(src)
    arch = reader.fields['general.architecture'].contents()
    n_layers = int(reader.fields[f'{arch}.block_count'].contents())
    names = {t.name for t in reader.tensors}
    tied = 'output.weight' not in names
    w = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        if field.name == 'general.architecture' or field.name.startswith('GGUF.'):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == 'general.file_type':
            value = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        w.add_key_value(field.name, value, vtype, sub_type=sub)
    counts = {}
    for t in reader.tensors:
        ne = [int(v) for v in t.shape]
        arr = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32)
        arr = arr.reshape(tuple(reversed(ne)))
        if arr.ndim == 2:
            data, qtype = quantize(arr, choose_type(t.name, n_layers, tied, scheme))
            w.add_tensor(t.name, data, raw_dtype=qtype)
        else:
            qtype = T.F32
            w.add_tensor(t.name, arr)
        counts[qtype.name] = counts.get(qtype.name, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return counts


def tiny(out_dir, seed):
    """A tiny Llama (GQA, tied) with 256-wide rows; returns the K file's path."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_tiny_models as m  # the tiny models' weights and vocabulary
    cfg = dict(m.LLAMA_BASE, hidden_size=256, intermediate_size=512)
    hf = m.llama_hf_weights(cfg, m.Gen(seed))
    tokens, types, merges = m.tiny_vocab()
    os.makedirs(out_dir, exist_ok=True)
    f32 = os.path.join(out_dir, 'model.f32.gguf')
    m.write_gguf(f32, cfg, m.hf_to_gguf_tensors(cfg, hf), 'f32', tokens, types, merges)
    out = os.path.join(out_dir, 'model.mixed_k.gguf')
    requantize(f32, out, 'mixed_k')
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('requantize')
    r.add_argument('src')
    r.add_argument('dst')
    r.add_argument('--scheme', default='q4_k_m', choices=['q4_k_m', 'mixed_k'])
    t = sub.add_parser('tiny')
    t.add_argument('out_dir')
    t.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == 'requantize':
        print(requantize(args.src, args.dst, args.scheme))
    else:
        print(tiny(args.out_dir, args.seed))
    return 0


if __name__ == '__main__':
    sys.exit(main())
