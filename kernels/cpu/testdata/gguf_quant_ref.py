"""Writes random ggml blocks and their dequantization by gguf.quants (numpy).

The independent reference for quant_types_test. Usage:
  gguf_quant_ref.py OUT_DIR SEED
For each type writes OUT_DIR/<TYPE>.raw (blocks) and OUT_DIR/<TYPE>.f32
(dequantized little-endian float32), and conversions.f32/.f16/.bf16 for the
scalar float conversions. Prints one "TYPE n_elems" line per type.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

# Byte offsets of the f16 scale fields inside each block: they get finite
# random halves so the reference never sees inf/nan; every other byte is random.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(seed)
    rows, n = 3, 1024
    for t, fields in F16_FIELDS.items():
        bs, ts = quants.GGML_QUANT_SIZES[t]
        nb = rows * n // bs
        raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
        for off in fields:
            h = (rng.standard_normal(nb) * 0.05).astype(np.float16)
            raw[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
        raw = raw.reshape(rows, -1)
        deq = quants.dequantize(raw, t).astype(np.float32)
        raw.tofile(os.path.join(out, t.name + ".raw"))
        deq.tofile(os.path.join(out, t.name + ".f32"))
        print(t.name, rows * n)
    # Half formats: every finite bit pattern class incl. subnormals.
    h = rng.integers(0, 1 << 16, size=rows * n, dtype=np.uint16)
    h = h[(h & 0x7C00) != 0x7C00]
    h.tofile(os.path.join(out, "F16.raw"))
    h.view(np.float16).astype(np.float32).tofile(os.path.join(out, "F16.f32"))
    print("F16", h.size)
    b = rng.integers(0, 1 << 16, size=rows * n, dtype=np.uint16)
    b = b[(b & 0x7F80) != 0x7F80]
    b.tofile(os.path.join(out, "BF16.raw"))
    quants.dequantize(b.view(np.uint8), T.BF16).astype(np.float32).tofile(
        os.path.join(out, "BF16.f32"))
    print("BF16", b.size)
    # float -> half/bf16 rounding: wide dynamic range incl. half subnormals
    # and overflow.
    x = (rng.standard_normal(4096) * np.exp2(rng.integers(-30, 18, size=4096))).astype(np.float32)
    x.tofile(os.path.join(out, "conversions.f32"))
    with np.errstate(over="ignore"):
        x.astype(np.float16).tofile(os.path.join(out, "conversions.f16"))
    quants.quantize(x, T.BF16).tofile(os.path.join(out, "conversions.bf16"))
    print("conversions", x.size)


if __name__ == "__main__":
    main()
