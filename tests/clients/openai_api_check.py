#!/usr/bin/env python3
"""`rill serve --openai_port` through the official openai SDK (pinned in
tools/requirements.txt): chat completions streaming and not, logprobs, n=2, stop strings, max_tokens -> "length", a 400 for a bad
temperature, and greedy text equal to what Rill's native gRPC API returns.
Each check prints PASS/FAIL; the exit code is the number of failures.

  python tests/clients/openai_api_check.py --base_url http://127.0.0.1:8000/v1 \
      --native 127.0.0.1:50051
"""
import argparse
import importlib
import sys
import tempfile

import grpc
import openai

from check_report import check, summary


def native_stub(address, proto_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="rill_stubs_")
    rc = protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out, "--grpc_python_out=" + out,
                      "rill/v1/inference.proto", "rill/v1/admin.proto"])
    if rc != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, out)
    pb = importlib.import_module("rill.v1.inference_pb2")
    pbg = importlib.import_module("rill.v1.inference_pb2_grpc")
    channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=60)
    return pb, pbg.InferenceStub(channel)


def native_greedy_text(pb, stub, prompt, max_tokens):
    start = pb.StartRequest(request_id="native-greedy", text=prompt,
                            sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0.0))
    text = []
    for resp in stub.Generate(iter([pb.GenerateRequest(start=start)]), timeout=120):
        for c in resp.outputs:
            text.append(c.text)
    return "".join(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base_url", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--proto_dir", default="proto")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", timeout=120, max_retries=0)

    models = [m.id for m in client.models.list().data]
    check("models lists the engine's model", len(models) == 1, models)
    model = models[0]

    messages = [{"role": "user", "content": "What is the capital of France?"}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                          temperature=0)
    content = chat.choices[0].message.content
    check("chat completion", bool(content) and chat.choices[0].finish_reason in ("stop", "length")
          and chat.usage.completion_tokens > 0, chat)
    parts, finish = [], None
    for ev in client.chat.completions.create(model=model, messages=messages, max_tokens=24,
                                             temperature=0, stream=True):
        for c in ev.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    check("chat streaming equals the non-streamed text", "".join(parts) == content,
          ("".join(parts), content))
    check("chat streaming ends with a finish_reason", finish == chat.choices[0].finish_reason, finish)

    prompt = "The capital of France is Paris. The capital of Germany is"
    greedy = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0)
    pb, stub = native_stub(args.native, args.proto_dir)
    native = native_greedy_text(pb, stub, prompt, 12)
    check("greedy completion text equals the native gRPC API's", greedy.choices[0].text == native,
          (greedy.choices[0].text, native))

    # Logprobs: the chat API carries them (smg 1.13 leaves them out of the
    # legacy completions response over gRPC; the request still succeeds).
    lp = client.chat.completions.create(model=model, messages=messages, max_tokens=6,
                                        temperature=0, logprobs=True, top_logprobs=2)
    content_lp = lp.choices[0].logprobs.content if lp.choices[0].logprobs else None
    check("chat logprobs: one per token with 2 alternatives",
          content_lp is not None and len(content_lp) == lp.usage.completion_tokens
          and all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content_lp)
          and content_lp[0].top_logprobs[0].logprob >= content_lp[0].top_logprobs[1].logprob,
          content_lp)
    legacy = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0,
                                       logprobs=2)
    check("completion with logprobs answers", legacy.choices[0].text == greedy.choices[0].text[
        :len(legacy.choices[0].text)] and legacy.usage.completion_tokens == 6, legacy)
    two = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=1.0,
                                    n=2, seed=3)
    check("n=2 gives choices 0 and 1", sorted(c.index for c in two.choices) == [0, 1], two.choices)

    text = greedy.choices[0].text
    stop = text[len(text) // 2:len(text) // 2 + 3]
    stopped = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0,
                                        stop=[stop])
    check("stop string: finish stop, the text cut before it",
          stopped.choices[0].finish_reason == "stop"
          and stopped.choices[0].text == text[:text.find(stop)], (stop, stopped.choices[0]))

    short = client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0)
    check("max_tokens -> finish_reason length",
          short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 3, short)

    try:
        client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=-1)
        check("temperature=-1 -> 400", False, "accepted")
    except openai.BadRequestError as e:
        check("temperature=-1 -> 400", e.status_code == 400, e)
    except openai.APIStatusError as e:
        check("temperature=-1 -> 400", False, (e.status_code, e.message))

    return summary()


if __name__ == "__main__":
    sys.exit(main())
