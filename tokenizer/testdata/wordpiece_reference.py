#!/usr/bin/env python3
"""Reference WordPiece encodings from the PyPI `tokenizers` package.

Usage: wordpiece_reference.py TOKENIZER_JSON OUT_TSV [SEED]
Writes one line per text: hex(utf-8 text) TAB space-separated ids (with
[CLS]/[SEP]), truncation and padding off. Texts: fixed cases (accents, CJK,
Hangul, punctuation, controls, special tokens, long words) plus random
mixtures drawn with SEED.
"""
import random
import sys

from tokenizers import Tokenizer

FIXED = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Café déjà vu: naïve façade, résumé, coöperate.",
    "ÀÉÎÕÜ àéîõü ÇÑ çñ Ångström Øresund Straße",
    "北京是中国的首都。",
    "東京タワーは日本にあります",
    "한국어 문장도 토큰화됩니다.",
    "Ελληνικά κείμενα και Русский текст",
    "don't stop-believing; (really) [ok] {fine} <tag> a/b\\c",
    "$100 + 20% = #hash @user ^caret `tick` |pipe| ~tilde",
    "Numbers: 3.14159, 1,000,000 and 42nd.",
    "Tabs\tand\nnewlines\r\nand   spaces",
    "control\x00chars\x07here\ufffdand\u200bzero-width",
    "[CLS] already [SEP] special [MASK] tokens [UNK]",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a" * 120,
    "x" * 99 + " " + "y" * 101,
    "emoji 😀🎉 and symbols ©®™ ½ ²",
    "İstanbul ǅ ß ﬁ Ⅻ",
    "combining e\u0301 a\u0308 o\u0302 n\u0303",
    "",
    "   ",
    "UPPER lower MiXeD",
    "email@example.com https://example.org/path?q=1&r=2",
    "“smart quotes” ‘single’ — em dash – en dash … ellipsis",
    "Arabic: مرحبا بالعالم Hebrew: שלום עולם",
    "Thai: สวัสดีครับ Hindi: नमस्ते दुनिया",
    "日本語とEnglishの混在テキスト、句読点。",
]

POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 4 +
        list(" " * 30) + list(".,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`") +
        list("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßÀÉÑÖÜ") + list("中文字北京日本語東京") +
        list("ひらがなカタカナ한국어") + list("αβγδεЖЗИЙ") + ["\t", "\n", "\u0301", "😀"])


def main():
    path, out = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = random.Random(seed)
    texts = list(FIXED)
    while len(texts) < 160:
        texts.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 80))))
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    with open(out, "w") as f:
        for t in texts:
            ids = tok.encode(t).ids
            f.write("%s\t%s\n" % (t.encode("utf-8").hex(), " ".join(map(str, ids))))


if __name__ == "__main__":
    main()
