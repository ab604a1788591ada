#!/usr/bin/env python3
"""Writes the sentence-transformers reference for all-MiniLM-L6-v2.

sentence-transformers needs torch, whose PyPI wheels pull several GB of CUDA
libraries, too much for every CI run. So this script is run by hand in a
throw-away venv (`pip install sentence-transformers`) and its output is kept
in tests/reference/testdata/:
  st_minilm_sentences.txt   N sentences, one per line (UTF-8)
  st_minilm_embeddings.f32  N x 384 little-endian float32, the package's
                            SentenceTransformer(model_dir).encode() output
                            (its own pipeline: tokenizer, BERT, mean pooling,
                            L2 normalization)
engine/async_llm_engine_encode_test.cc compares Rill's Encode against them.

Usage: sentence_transformers_minilm.py MODEL_DIR OUT_DIR [N] [SEED]
"""
import os
import random
import sys

import numpy as np
from sentence_transformers import SentenceTransformer

WORDS = ("the a model server runs many requests in one batch fast slow cache block token "
         "river mountain city music learning neural embedding vector search query answer "
         "café naïve résumé 北京 東京 données über straße don't isn't 3.14 42 "
         "hello world paris france capital question , . ; ! ? ( ) "
         "A man is eating food. The girl is carrying a baby. Embeddings MATCH?").split()


def sentences(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.choice([1, 2, 5, 10, 20, 40, 60, 90])
        out.append(' '.join(rng.choice(WORDS) for _ in range(length)))
    return out


def main():
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 11
    texts = sentences(n, seed)
    model = SentenceTransformer(model_dir, device='cpu')
    emb = model.encode(texts, batch_size=16, convert_to_numpy=True)
    assert emb.shape == (n, 384), emb.shape
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, 'st_minilm_sentences.txt'), 'w', encoding='utf-8') as f:
        for t in texts:
            f.write(t + '\n')
    emb.astype('<f4').tofile(os.path.join(out_dir, 'st_minilm_embeddings.f32'))
    print(f'wrote {n} sentences and embeddings ({emb.shape[1]} dims) to {out_dir}')


if __name__ == '__main__':
    main()
