#!/usr/bin/env python3
"""`rill serve --model=<embedding model> --openai_port` through the official
openai SDK: /v1/embeddings answers with unit vectors (float, and the SDK's
default base64 encoding), and a completion on the embedding model is a 4xx.
The vector equals Rill's native rill.v1 Encode; what a batch returns is
printed (an smg 1.13 gap). Each check prints PASS/FAIL; the exit
code is the number of failures.

  python tests/clients/openai_embeddings_check.py --base_url http://127.0.0.1:8000/v1 \
      --native 127.0.0.1:50051
"""
import argparse
import sys

import openai

from check_report import check, summary
from openai_api_check import native_stub

A = "A man is eating food."
B = "A man is eating a piece of bread."


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base_url", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--proto_dir", default="proto")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", timeout=120, max_retries=0)
    pb, stub = native_stub(args.native, args.proto_dir)
    native = [list(stub.Encode(pb.EncodeRequest(text=t), timeout=60).embedding) for t in (A, B)]

    model = client.models.list().data[0].id
    one = client.embeddings.create(model=model, input=A, encoding_format="float")
    e = one.data[0].embedding
    check("one input: a 384-dim unit vector", len(e) == 384 and abs(dot(e, e) - 1) < 1e-4, len(e))
    # The SDK asks for base64 unless told otherwise.
    b64 = list(client.embeddings.create(model=model, input=A).data[0].embedding)
    check("default (base64) encoding decodes to the float vector",
          len(b64) == 384 and max(abs(x - y) for x, y in zip(b64, e)) < 1e-6, len(b64))
    # rill serve gives smg the engine's tokenizer files (--tokenizer-path):
    # sentence-transformers' own tokenizer.json pads every text to 128 [PAD]
    # tokens, which the engine would then embed.
    check("one input: the native Encode's vector and token count",
          dot(e, native[0]) > 0.9999 and one.usage.prompt_tokens == 8,
          (round(dot(e, native[0]), 4), one.usage.prompt_tokens))
    # A known smg 1.13 gap, printed rather than checked: a list of inputs
    # comes back as one vector.
    batch = client.embeddings.create(model=model, input=[A, B], encoding_format="float")
    print("NOTE a batch of two inputs returned %d vector(s), usage %s"
          % (len(batch.data), batch.usage), flush=True)

    try:
        client.completions.create(model=model, prompt="hi", max_tokens=2)
        check("a completion on an embedding model is refused", False, "it answered")
    except openai.APIStatusError as err:
        # UNIMPLEMENTED from the engine: smg answers 501 with its message.
        check("a completion on an embedding model is refused, saying why",
              (400 <= err.status_code < 500 or err.status_code == 501)
              and "encoder" in str(err), (err.status_code, str(err)[:200]))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
