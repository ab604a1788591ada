#!/usr/bin/env python3
"""Writes the small benchmark dataset shipped in data/prompts.jsonl.

Prompts are assembled from fixed word lists with a seeded RNG, so the file is
reproducible (`python3 bench/serve_bench/make_dataset.py` rewrites it
byte for byte) and nothing is downloaded. The mix mirrors chat traffic: short
questions, instructions with context paragraphs, code requests, and a few long
documents to summarise; output lengths vary per prompt.
"""
import argparse
import json
import random

TOPICS = ["rivers", "compilers", "the French revolution", "photosynthesis", "jazz", "volcanoes",
          "databases", "the moon landing", "bread baking", "chess openings", "neural networks",
          "medieval castles", "coral reefs", "the stock market", "origami", "black holes"]
VERBS = ["Explain", "Summarise", "Describe", "Compare", "Criticise", "List the key facts about",
         "Write a short story about", "Give three examples of", "Write a poem about"]
AUDIENCES = ["a child", "a university student", "an expert", "a tourist", "a journalist"]
CODE = ["a Python function that reverses a linked list", "a C++ class for a ring buffer",
        "a SQL query that finds duplicate emails", "a shell script that renames files by date",
        "a Rust iterator over prime numbers", "a JavaScript debounce helper"]
WORDS = ("the of and to in is was for on that with as by at from this which are be it an has had "
         "were their not but its also been more than other into after first new two time years "
         "water system people world state city river small large north early known part found").split()


def paragraph(rng, sentences):
    out = []
    for _ in range(sentences):
        n = rng.randint(8, 20)
        words = [rng.choice(WORDS) for _ in range(n)]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def make_prompt(rng):
    kind = rng.random()
    if kind < 0.35:
        return f"{rng.choice(VERBS)} {rng.choice(TOPICS)} for {rng.choice(AUDIENCES)}.", rng.choice([32, 64, 128])
    if kind < 0.6:
        ctx = paragraph(rng, rng.randint(3, 8))
        return (f"Context: {ctx}\n\nUsing the context, {rng.choice(VERBS).lower()} "
                f"{rng.choice(TOPICS)}."), rng.choice([64, 128, 256])
    if kind < 0.85:
        return f"Write {rng.choice(CODE)}. Include comments and a usage example.", rng.choice([128, 256])
    doc = "\n\n".join(paragraph(rng, rng.randint(6, 12)) for _ in range(rng.randint(4, 8)))
    return f"Summarise the following document in five bullet points.\n\n{doc}", rng.choice([64, 128])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="bench/serve_bench/data/prompts.jsonl")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20261203)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        for _ in range(args.count):
            prompt, out_len = make_prompt(rng)
            f.write(json.dumps({"prompt": prompt, "output_len": out_len}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
