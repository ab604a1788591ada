#!/usr/bin/env python3
"""The smg gateway's overhead over Rill's native gRPC API at concurrency 1:
the same greedy request (a text prompt, --tokens tokens with ignore_eos)
streamed --requests times through each, alternating rounds so background load
hits both alike. Prints the median time to first token and total latency.

  ./rill serve --openai_port=8000 --ready_file=/tmp/rill.ready &
  .venv/bin/python bench/openai_gateway_overhead.py --native "$(cat /tmp/rill.ready)" \
      --openai http://127.0.0.1:8000/v1
"""
import argparse
import importlib
import statistics
import sys
import tempfile
import time

import grpc
import openai


def native_stub(address, proto_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="rill_stubs_")
    protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out, "--grpc_python_out=" + out,
                 "rill/v1/inference.proto", "rill/v1/admin.proto"])
    sys.path.insert(0, out)
    pb = importlib.import_module("rill.v1.inference_pb2")
    pbg = importlib.import_module("rill.v1.inference_pb2_grpc")
    return pb, pbg.InferenceStub(grpc.insecure_channel(address))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--native", required=True, help="host:port of rill serve's gRPC API")
    ap.add_argument("--openai", required=True, help="the gateway's base URL (.../v1)")
    ap.add_argument("--proto_dir", default="proto")
    ap.add_argument("--prompt", default="Write a short story about a river that flows to the sea.")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    pb, stub = native_stub(args.native, args.proto_dir)
    client = openai.OpenAI(base_url=args.openai, api_key="unused", max_retries=0)
    model = client.models.list().data[0].id

    def native():
        t0 = time.perf_counter()
        ttft, n = None, 0
        start = pb.StartRequest(request_id="bench-%f" % t0, text=args.prompt,
                                sampling=pb.SamplingParams(max_tokens=args.tokens,
                                                           temperature=0.0, ignore_eos=True))
        for r in stub.Generate(iter([pb.GenerateRequest(start=start)])):
            for c in r.outputs:
                if c.token_ids and ttft is None:
                    ttft = time.perf_counter() - t0
                n += len(c.token_ids)
        return ttft, time.perf_counter() - t0, n

    def gateway():
        t0 = time.perf_counter()
        ttft, n = None, 0
        for ev in client.completions.create(model=model, prompt=args.prompt,
                                            max_tokens=args.tokens, temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}):
            if ev.choices and ev.choices[0].text and ttft is None:
                ttft = time.perf_counter() - t0
            if ev.usage:
                n = ev.usage.completion_tokens
        return ttft, time.perf_counter() - t0, n

    for _ in range(args.rounds):
        for name, run in (("native gRPC", native), ("smg gateway", gateway)):
            run()  # Warm (prefix cache, connections).
            rs = [run() for _ in range(args.requests)]
            print("%-12s c=1, %d requests of %s tokens: TTFT median %.1f ms, total median %.0f ms"
                  % (name, args.requests, sorted({r[2] for r in rs}),
                     1000 * statistics.median(r[0] for r in rs),
                     1000 * statistics.median(r[1] for r in rs)), flush=True)


if __name__ == "__main__":
    main()
