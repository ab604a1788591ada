#!/usr/bin/env python3
"""`rill serve --openai_port` through the official openai SDK (pinned in
tools/requirements.txt): chat completions streaming and not, logprobs, n=2,
stop strings (not before min_tokens), max_tokens -> "length", a 400 for a bad
temperature, and greedy text equal to what Rill's native gRPC API returns.
With --admin_key_file: the gateway's control plane (/workers) refuses
callers without that key.
Each check prints PASS/FAIL; the exit code is the number of failures.

  python tests/clients/openai_api_check.py --base_url http://127.0.0.1:8000/v1 \
      --native 127.0.0.1:50051
"""
import argparse
import importlib
import json
import sys
import tempfile
import urllib.error
import urllib.request

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


def http_status(method, url, key=None, body=None):
    """(status, body) of one HTTP call, with `key` as a Bearer token."""
    req = urllib.request.Request(url, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if key is not None:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_control_plane(base_url, key_file):
    """Worker registration needs the control-plane key; the OpenAI API does not."""
    root = base_url.rsplit("/v1", 1)[0]
    with open(key_file) as f:
        key = f.read().strip()
    rogue = {"url": "grpc://127.0.0.1:9"}
    code, _ = http_status("POST", root + "/workers", body=rogue)
    check("POST /workers without a key is refused (401)", code == 401, code)
    code, _ = http_status("POST", root + "/workers", key="not-the-key", body=rogue)
    check("POST /workers with a wrong key is refused (401)", code == 401, code)
    for method, path in (("DELETE", "/workers/any"), ("POST", "/flush_cache"), ("GET", "/workers")):
        code, _ = http_status(method, root + path)
        check("%s %s without a key is refused (401)" % (method, path), code == 401, code)
    code, body = http_status("GET", root + "/workers", key=key)
    workers = json.loads(body).get("workers", []) if code == 200 else []
    check("GET /workers with the key lists only rill's engine", code == 200
          and [w["url"] for w in workers if w["url"] == rogue["url"]] == [] and len(workers) == 1,
          (code, body[:200]))
    code, _ = http_status("GET", base_url + "/models")
    check("the OpenAI API itself needs no control-plane key", code == 200, code)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base_url", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--proto_dir", default="proto")
    ap.add_argument("--admin_key_file", help="the gateway's control-plane key")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", timeout=120, max_retries=0)
    if args.admin_key_file:
        check_control_plane(args.base_url, args.admin_key_file)

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

    # vLLM's min_tokens: a stop string in the first min_tokens tokens does
    # not stop the completion. The first visible character stops it at once
    # without min_tokens.
    first = text.strip()[0]
    early = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0,
                                      stop=[first])
    late = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0,
                                     stop=[first], extra_body={"min_tokens": 6})
    check("stop string without min_tokens ends within 2 tokens",
          early.choices[0].finish_reason == "stop" and early.usage.completion_tokens <= 2, early)
    # The engine honours min_tokens (it generates past the early match);
    # smg 1.13 also matches stop strings on its side, without min_tokens, and
    # cuts the text it returns at the first match: printed, not checked.
    check("stop string: the engine generates past min_tokens=6",
          late.usage.completion_tokens > 6, (first, late.choices[0], late.usage))
    print("NOTE smg 1.13 cuts the text at the first stop string regardless of min_tokens: %r"
          % late.choices[0].text, flush=True)

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
