#!/usr/bin/env python3
"""Writes token ids of N test sentences for a BERT tokenizer.json, one
comma-separated line each, tokenized by the PyPI `tokenizers` package
(no truncation/padding). Sentences: varied lengths (3..~120 tokens), drawn
with SEED from a word list plus accents, CJK and punctuation.

Usage: bert_sentences.py TOKENIZER_JSON OUT N SEED
"""
import random
import sys

from tokenizers import Tokenizer

WORDS = ("the a model server runs many requests in one batch fast slow cache block token "
         "river mountain city music learning neural embedding vector search query answer "
         "café naïve résumé 北京 東京 données über straße don't isn't 3.14 42 "
         "hello world paris france capital question , . ; ! ? ( )").split()


def main():
    path, out, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    with open(out, 'w') as f:
        for i in range(n):
            length = rng.choice([1, 2, 5, 10, 20, 40, 60, 90])
            text = ' '.join(rng.choice(WORDS) for _ in range(length))
            f.write(','.join(map(str, tok.encode(text).ids)) + '\n')


if __name__ == '__main__':
    main()
