#!/usr/bin/env python3
"""`rill serve --model=<embedding model> --openai_port` through the official
openai SDK: /v1/embeddings (one input, a batch, float and the SDK's default
base64 encoding) returns the same vectors as Rill's native rill.v1 Encode,
and the published similarity of the sentence-transformers pair. Each check
prints PASS/FAIL; the exit code is the number of failures.

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
    check("equals the native Encode's vector", max(abs(x - y) for x, y in zip(e, native[0])) < 1e-5,
          dot(e, native[0]))
    check("usage counts the prompt tokens (8)", one.usage.prompt_tokens == 8, one.usage)

    batch = client.embeddings.create(model=model, input=[A, B], encoding_format="float")
    vs = [d.embedding for d in sorted(batch.data, key=lambda d: d.index)]
    check("a batch of two: one vector per input, in order",
          len(vs) == 2 and [d.index for d in batch.data] == [0, 1], [d.index for d in batch.data])
    check("similarity of the pair is the published 0.7553", abs(dot(vs[0], vs[1]) - 0.7553) < 2e-3,
          dot(vs[0], vs[1]))

    # The SDK asks for base64 unless told otherwise.
    b64 = client.embeddings.create(model=model, input=B)
    v = list(b64.data[0].embedding)
    check("default (base64) encoding decodes to the native vector",
          len(v) == 384 and max(abs(x - y) for x, y in zip(v, native[1])) < 1e-5, len(v))

    try:
        client.completions.create(model=model, prompt="hi", max_tokens=2)
        check("a completion on an embedding model is refused", False, "it answered")
    except openai.APIStatusError as err:
        check("a completion on an embedding model is refused with a 4xx",
              400 <= err.status_code < 500, (err.status_code, str(err)[:200]))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
