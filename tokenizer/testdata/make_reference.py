#!/usr/bin/env python3
"""Builds reference tokenizers with the PyPI `tokenizers` library and writes
expected encodings for the C++ parity tests.

Usage: make_reference.py --out DIR [--gguf MODEL.gguf] [--seed N]

Writes under DIR:
  smollm/tokenizer.json, smollm/tokenizer_config.json   (from the GGUF vocab)
  smollm/encode.tsv   hex(text) \t ids           (add_special_tokens=True)
  smollm/decode.tsv   ids \t hex(decoded)         (random ids, lossy UTF-8)
  gpt2/..., spm/...   tiny trained tokenizers, same files
  pretok_<name>.tsv   hex(text) \t hex(piece) ...  (reference pre-tokenizers)
"""
import argparse
import json
import os
import random
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models
from tokenizers import normalizers, pre_tokenizers, trainers

GPT2_RE = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
           r"|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
             r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
# Qwen3.5's tokenizer.json regex: marks join letter runs.
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"
             r"|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

FIXED = [
    "", " ", "  ", "\n", "\n\n", "\t", " \t\n ", "Hello world", "Hello  world",
    "hello world   ", "   leading spaces", "I'm sure it's fine, isn't it? "
    "We'll see; they'd've", "DON'T SHOUT IT'S LOUD", "I'M HERE 'S 'T 'Re",
    "def foo(x):\n    return x ** 2  # square\n", "int main() {\n\treturn 0;\n}",
    "for (int i = 0; i < 10; ++i) { a[i] += b[i]; }", "x=1;y=22;z=333;w=4444",
    "3.14159 2,718 1e-9 0x1F 1234567890", "$100.00 and 50% off!!!",
    "你好，世界！这是一个测试。", "日本語のテキスト、カタカナ。", "한국어 텍스트",
    "مرحبا بالعالم", "नमस्ते दुनिया", "Привет, мир!", "Ελληνικά γράμματα",
    "👋🏽 hi 👨‍👩‍👧‍👦 family 🏳️‍🌈 flag", "emoji😀😃😄😁", "é vs é (combining)",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>", "a<|im_end|>b", "<|im_start", "<|im_end|",
    "tab\tseparated\tvalues\r\nwindows line\r\n", "nbsp\u00a0here\u3000ideo",
    "line1\n\n\nline2   \n  line3", "   \n\n   x", "1 2 3  4   5",
    "https://example.com/path?q=1&r=two#frag", "snake_case camelCase PascalCase",
    "\u0000\u0001\u001f\u007f", "ǅungla ǈ", "ſtraße 'ſ 'S", "¹²³ ½ ⅓ Ⅻ ٣٤٥ ४५६",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "مرحباالعالمبكتاب", "नमस्तेदुनियाहिन्दी", "ПриветМирЖизнь",
    "😀🎉🚀❤️👍🏽", "\u200d", "👨‍👩‍👧", "\u0301\u0308",
    "éüñçø", "٠١٢٣٤٥", "①②③", "¼½¾",
]
SPECIAL_POOL = SPECIALS + ["<|im_start|>user\n", "<|im_end|>\n"]


def random_codepoint(rng):
    while True:
        cp = rng.choice([rng.randrange(0x20, 0x800), rng.randrange(0x800, 0x10000),
                         rng.randrange(0x10000, 0x20000)])
        if 0xD800 <= cp < 0xE000:
            continue
        if unicodedata.category(chr(cp)) in ("Cn", "Co", "Cs"):
            continue
        return chr(cp)


def random_text(rng, with_specials):
    kind = rng.random()
    if kind < 0.1:
        # Random bytes read as Latin-1: control chars, C1, symbols.
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))
                     ).decode("latin-1")
    if kind < 0.2:
        return "".join(random_codepoint(rng) for _ in range(rng.randrange(1, 30)))
    parts = []
    for _ in range(rng.randrange(1, 25)):
        r = rng.random()
        if with_specials and r < 0.05:
            parts.append(rng.choice(SPECIAL_POOL))
        elif r < 0.1:
            parts.append(random_codepoint(rng))
        else:
            pool = rng.choice(POOLS)
            parts.append("".join(rng.choice(pool) if len(pool) > 3 else pool
                                 for _ in range(rng.randrange(1, 8))))
    return "".join(parts)


def corpus(seed, n, with_specials):
    rng = random.Random(seed)
    texts = list(FIXED)
    if not with_specials:
        texts = [t for t in texts if "<|" not in t]
    while len(texts) < n:
        texts.append(random_text(rng, with_specials))
    return texts


def hexs(s):
    return s.encode("utf-8").hex()


def write_encodings(tok, texts, path):
    encs = tok.encode_batch(texts, add_special_tokens=True)
    with open(path, "w") as f:
        for t, e in zip(texts, encs):
            f.write("%s\t%s\n" % (hexs(t), " ".join(map(str, e.ids))))


def write_decodes(tok, seed, path, n=300, extra=()):
    rng = random.Random(seed + 1)
    size = tok.get_vocab_size()
    cases = [list(ids) for ids in extra]
    cases += [[rng.randrange(size) for _ in range(rng.randrange(1, 12))]
              for _ in range(n)]
    with open(path, "w") as f:
        for ids in cases:
            text = tok.decode(ids, skip_special_tokens=False)
            text_skip = tok.decode(ids, skip_special_tokens=True)
            f.write("%s\t%s\t%s\n" % (" ".join(map(str, ids)), hexs(text),
                                      hexs(text_skip)))


def read_gguf_tokenizer(path):
    import gguf
    r = gguf.GGUFReader(path)

    def arr(key):
        f = r.fields[key]
        return [f.parts[i] for i in f.data]

    tokens = [bytes(p).decode("utf-8") for p in arr("tokenizer.ggml.tokens")]
    types = [int(p[0]) for p in arr("tokenizer.ggml.token_type")]
    merges = [bytes(p).decode("utf-8") for p in arr("tokenizer.ggml.merges")]
    tmpl = bytes(r.fields["tokenizer.chat_template"].parts[-1]).decode("utf-8")
    return tokens, types, merges, tmpl


def build_smollm(gguf_path, out, seed, n):
    tokens, types, merges, tmpl = read_gguf_tokenizer(gguf_path)
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                     fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t, ty in zip(tokens, types) if ty == 3])
    d = os.path.join(out, "smollm")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": tmpl, "bos_token": "<|im_start|>",
                   "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
                   "add_bos_token": False}, f)
    write_encodings(tok, corpus(seed, n, True), os.path.join(d, "encode.tsv"))
    write_decodes(tok, seed, os.path.join(d, "decode.tsv"))


def build_gpt2(out, seed, n):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<|endoftext|>", "<|im_start|>",
                                        "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tok.train_from_iterator(corpus(seed + 7, 3000, False), trainer)
    tok.add_tokens([AddedToken("<tool>", normalized=False, special=False)])
    d = os.path.join(out, "gpt2")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    write_encodings(tok, corpus(seed + 1, n, True) + ["a<tool>b <tool>"],
                    os.path.join(d, "encode.tsv"))
    write_decodes(tok, seed, os.path.join(d, "decode.tsv"))


def build_spm(out, seed, n):
    # Train on Metaspace words, then rebuild as a Llama-2 style tokenizer:
    # <unk>,<s>,</s>, 256 byte tokens, then the learned pieces.
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                            normalizers.Replace(" ", "\u2581")])
    base.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    trainer = trainers.BpeTrainer(vocab_size=800, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=120)
    base.train_from_iterator(corpus(seed + 9, 3000, False), trainer)
    model = json.loads(base.to_str())["model"]
    learned = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for t, _ in learned:
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1))
              for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>",
                               fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([
        decoders.Replace("\u2581", " "), decoders.ByteFallback(),
        decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in ["<unk>", "<s>", "</s>"]])
    from tokenizers import processors
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    d = os.path.join(out, "spm")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    texts = [t for t in corpus(seed + 2, n, False)]
    texts += ["<s>hello</s> world", "x<s>", "  two spaces"]
    write_encodings(tok, texts, os.path.join(d, "encode.tsv"))
    # Byte-fallback runs (HF keeps a run that is valid UTF-8 and makes every
    # byte of any other run U+FFFD): valid, cut short, valid then invalid,
    # split by a piece, by a skipped special token, at the start (a space).
    byte = lambda b: vocab["<0x%02X>" % b]
    piece = vocab[learned[-1][0]]
    extra = [
        [byte(0xC3), byte(0xA9)],
        [byte(0xE2), byte(0x82)],
        [byte(0xC3), byte(0xA9), byte(0xE9)],
        [byte(0xE2), byte(0x82), byte(0xAC), piece, byte(0xF0)],
        [byte(0xC3), 2, byte(0xA9), piece],
        [byte(0x20), byte(0xC3), byte(0xA9), piece, byte(0x41)],
        [piece, byte(0xFF), byte(0x41), byte(0x42)],
    ]
    write_decodes(tok, seed + 5, os.path.join(d, "decode.tsv"), 500, extra)


def write_pretok(out, seed, n):
    texts = corpus(seed + 3, n, False)
    pats = {
        "gpt2": pre_tokenizers.Split(Regex(GPT2_RE), "isolated"),
        "smollm": pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Split(Regex(GPT2_RE), "isolated")]),
        "llama3": pre_tokenizers.Split(Regex(LLAMA3_RE), "isolated"),
        "qwen2": pre_tokenizers.Split(Regex(QWEN2_RE), "isolated"),
        "qwen35": pre_tokenizers.Split(Regex(QWEN35_RE), "isolated"),
    }
    for name, pt in pats.items():
        with open(os.path.join(out, "pretok_%s.tsv" % name), "w") as f:
            for t in texts:
                pieces = [p for p, _ in pt.pre_tokenize_str(t)]
                f.write("%s\t%s\n" % (hexs(t), " ".join(hexs(p) for p in pieces)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--gguf")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n", type=int, default=2500)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    write_pretok(a.out, a.seed, a.n)
    build_gpt2(a.out, a.seed, min(a.n, 1000))
    build_spm(a.out, a.seed, min(a.n, 1000))
    if a.gguf:
        build_smollm(a.gguf, a.out, a.seed, a.n)


if __name__ == "__main__":
    main()
