"""Python `tokenizers` (what the smg gateway tokenizes with) on the
tokenizer.json + tokenizer_config.json that rill-engine's GetTokenizer writes
for a GGUF, against Rill's own tokenizer.

--dir holds the two files and cases.json, written by
//engine/service:hf_tokenizer_files_vocab_test from Rill's tokenizer:
{"encode": [{"text", "ids", "ids_special"}], "decode": [{"ids", "text",
"text_skip"}]}. Every text must encode to Rill's ids (without and with special
tokens) and every id list must decode to Rill's text (without and with
skip_special_tokens). Exits 1 listing the first differences.
"""

import argparse
import json
import os
import sys

from tokenizers import Tokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "tokenizer.json"), encoding="utf-8") as f:
        hf = Tokenizer.from_str(f.read())
    with open(os.path.join(args.dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(args.dir, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)

    failures = []

    def check(what, got, want):
        if got != want:
            failures.append(f"{what}: tokenizers gives {got!r}, Rill {want!r}")

    for bos_eos in ("bos_token", "eos_token"):
        token = config.get(bos_eos)
        if token is not None and hf.token_to_id(token) is None:
            failures.append(f"tokenizer_config.json {bos_eos} {token!r} is not a token")
    for case in cases["encode"]:
        text = case["text"]
        check(f"encode {text[:60]!r}", hf.encode(text, add_special_tokens=False).ids, case["ids"])
        check(f"encode {text[:60]!r} with special tokens", hf.encode(text).ids, case["ids_special"])
    for case in cases["decode"]:
        ids = case["ids"]
        check(f"decode {ids[:16]}", hf.decode(ids, skip_special_tokens=False), case["text"])
        check(f"decode {ids[:16]} skipping special tokens", hf.decode(ids, skip_special_tokens=True),
              case["text_skip"])

    print(f"{args.name}: tokenizers: {len(cases['encode'])} texts x2 encodes, "
          f"{len(cases['decode'])} id lists x2 decodes, {len(failures)} differences")
    for line in failures[:20]:
        print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
