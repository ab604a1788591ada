#!/usr/bin/env python3
"""OTLP traces of a running `rill serve --otlp_traces_endpoint=...`.

A recording OTLP/HTTP endpoint (http.server on 127.0.0.1) takes the spans;
then:
1. GetServerConfig reports is_tracing_enabled;
2. a request whose StartRequest.trace_headers carry a traceparent, and one
   whose Generate call's metadata does, each give a frontend span
   `llm_request` (SERVER, service rill-frontend) in that trace whose parent
   is the given span, and engine spans queue, prefill, decode (service
   rill-engine) and a frontend span detokenize in the same trace whose
   parent is the frontend span, with the token counts as attributes;
3. a request without a traceparent, and one with a malformed one, get a
   fresh trace (a root llm_request with the engine spans below it);
4. a VllmEngine/Generate call (the gateway's protocol, straight to the
   engine) with n=2 and a traceparent in its gRPC metadata gives, per
   sample, queue, prefill, decode spans (service rill-engine) in that trace
   whose parent is the given span;
5. with the endpoint gone, requests still finish normally and quickly.
Exits non-zero with the reason on any mismatch.
"""
import argparse
import http.server
import json
import os
import queue
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
from python_client import (add_serve_args, load_stubs, request_iterator, start_serve,  # noqa: E402
                           stop_serve, wait_for_serve)

PROMPT = list(range(100, 111))  # 11 token ids
MAX_TOKENS = 4
TRACE_A, PARENT_A = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACE_B, PARENT_B = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACE_C, PARENT_C = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
ENGINE_SPANS = ("queue", "prefill", "decode")


def fail(msg):
    raise AssertionError(msg)


class Recorder(http.server.ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.lock = threading.Lock()
        self.spans = []  # (service.name, span dict)
        self.errors = []


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        srv = self.server
        try:
            if self.path != "/v1/traces":
                raise ValueError("POST to %s" % self.path)
            if self.headers.get("Content-Type") != "application/json":
                raise ValueError("Content-Type %r" % self.headers.get("Content-Type"))
            doc = json.loads(body)
            got = []
            for rs in doc["resourceSpans"]:
                attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
                service = attrs["service.name"]["stringValue"]
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        got.append((service, s))
            with srv.lock:
                srv.spans.extend(got)
        except Exception as e:  # noqa: BLE001 - recorded and reported by the test
            with srv.lock:
                srv.errors.append(repr(e))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def attr(span, key):
    for a in span.get("attributes", []):
        if a["key"] == key:
            v = a["value"]
            return int(v["intValue"]) if "intValue" in v else next(iter(v.values()))
    return None


def generate(pb, stub, rid, trace_headers=None, metadata=None, timeout=120):
    outbox = queue.Queue()
    start = pb.StartRequest(request_id=rid, token_ids=pb.TokenIds(ids=PROMPT),
                            sampling=pb.SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0,
                                                       ignore_eos=True))
    for k, v in (trace_headers or {}).items():
        start.trace_headers[k] = v
    outbox.put(pb.GenerateRequest(start=start))
    tokens, reason = 0, None
    for resp in stub.Generate(request_iterator(outbox), timeout=timeout, metadata=metadata):
        for c in resp.outputs:
            tokens += len(c.token_ids)
            if c.finish_reason:
                reason = pb.FinishReason.Name(c.finish_reason)
        if resp.finished:
            if resp.status.code != 0:
                fail("%s failed: %s" % (rid, resp.status))
            outbox.put(None)
    if reason != "FINISH_REASON_LENGTH" or tokens != MAX_TOKENS:
        fail("%s: %s with %d tokens" % (rid, reason, tokens))


def wait_for_trace(rec, want, deadline_s=20, count=5):
    """Spans (service, span) matching predicate `want` once `count` are in
    (5: a request's llm_request, its 3 engine spans and its detokenize)."""
    deadline = time.time() + deadline_s
    while True:
        with rec.lock:
            got = [(svc, s) for svc, s in rec.spans if want(svc, s)]
        if len(got) >= count or time.time() > deadline:
            return got
        time.sleep(0.1)


def check_request_trace(rec, trace_id, parent, what):
    """The frontend span and the engine spans of one request in `trace_id`."""
    spans = wait_for_trace(rec, lambda svc, s: s["traceId"] == trace_id)
    front = [s for svc, s in spans if svc == "rill-frontend" and s["name"] == "llm_request"]
    if len(front) != 1:
        fail("%s: want 1 llm_request span in trace %s, got %s" % (what, trace_id, spans))
    front = front[0]
    if front["kind"] != 2:
        fail("%s: llm_request kind %s, want 2 (SERVER)" % (what, front["kind"]))
    if parent is None:
        if front.get("parentSpanId"):
            fail("%s: a fresh trace's llm_request has parent %s" % (what, front["parentSpanId"]))
    elif front.get("parentSpanId") != parent:
        fail("%s: llm_request parent %s, want %s" % (what, front.get("parentSpanId"), parent))
    if attr(front, "gen_ai.usage.prompt_tokens") != len(PROMPT) or \
            attr(front, "gen_ai.usage.completion_tokens") != MAX_TOKENS or \
            attr(front, "gen_ai.request.max_tokens") != MAX_TOKENS or \
            attr(front, "gen_ai.response.finish_reasons") != "length":
        fail("%s: llm_request attributes %s" % (what, front["attributes"]))
    if int(front["endTimeUnixNano"]) < int(front["startTimeUnixNano"]):
        fail("%s: llm_request ends before it starts" % what)
    engine = {s["name"]: s for svc, s in spans if svc == "rill-engine"}
    if sorted(engine) != sorted(ENGINE_SPANS):
        fail("%s: engine spans %s, want %s" % (what, sorted(engine), ENGINE_SPANS))
    for name, s in engine.items():
        if s.get("parentSpanId") != front["spanId"]:
            fail("%s: engine span %s has parent %s, want the frontend span %s" % (
                what, name, s.get("parentSpanId"), front["spanId"]))
    decode = engine["decode"]
    if attr(decode, "gen_ai.usage.completion_tokens") != MAX_TOKENS or \
            attr(decode, "gen_ai.usage.prompt_tokens") != len(PROMPT):
        fail("%s: decode attributes %s" % (what, decode["attributes"]))
    q, p, d = (engine[n] for n in ENGINE_SPANS)
    if not (int(q["endTimeUnixNano"]) <= int(p["startTimeUnixNano"]) + 1000 and
            int(p["endTimeUnixNano"]) <= int(d["startTimeUnixNano"]) + 1000):
        fail("%s: queue, prefill, decode out of order: %s" % (what, engine))
    check_detokenize_span(spans, front, trace_id, what)
    return front


def check_detokenize_span(spans, front, trace_id, what):
    """The frontend's detokenize span: a child of llm_request, inside it,
    with every generated token and the busy time llm_request also carries."""
    detok = [s for svc, s in spans if svc == "rill-frontend" and s["name"] == "detokenize"]
    if len(detok) != 1:
        fail("%s: want 1 detokenize span in trace %s, got %s" % (what, trace_id, spans))
    detok = detok[0]
    if detok["traceId"] != trace_id or detok.get("parentSpanId") != front["spanId"]:
        fail("%s: detokenize in trace %s with parent %s, want %s / llm_request %s" % (
            what, detok["traceId"], detok.get("parentSpanId"), trace_id, front["spanId"]))
    start, end = int(detok["startTimeUnixNano"]), int(detok["endTimeUnixNano"])
    if not int(front["startTimeUnixNano"]) <= start <= end <= int(front["endTimeUnixNano"]):
        fail("%s: detokenize [%d, %d] not inside llm_request %s" % (what, start, end, front))
    busy = attr(detok, "rill.detokenize_time_s")
    if attr(detok, "rill.detokenized_tokens") != MAX_TOKENS or busy is None or \
            not 0 < busy <= (end - start) / 1e9 + 1e-6:
        fail("%s: detokenize attributes %s (span %d ns)" % (what, detok["attributes"], end - start))
    if attr(front, "rill.detokenize_time_s") != busy:
        fail("%s: llm_request rill.detokenize_time_s %s, detokenize span's %s" % (
            what, attr(front, "rill.detokenize_time_s"), busy))


def check_vllm_trace(rec, smg_proto_dir, proto_dir, run_dir):
    """VllmEngine/Generate (n=2) with a traceparent in the call metadata."""
    import grpc
    from vllm_engine_conformance import load_stubs as load_vllm_stubs
    m = load_vllm_stubs(smg_proto_dir, proto_dir)
    vpb = m["vllm_engine_pb2"]
    engine = "127.0.0.1:%s" % open(os.path.join(run_dir, "engine.port")).read().strip()
    secret = open(os.path.join(run_dir, "engine.secret")).read().strip()
    stub = m["vllm_engine_pb2_grpc"].VllmEngineStub(grpc.insecure_channel(engine))
    req = vpb.GenerateRequest(
        request_id="vllm-traced", tokenized=vpb.TokenizedInput(input_ids=PROMPT),
        sampling_params=vpb.SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, n=2,
                                           ignore_eos=True))
    md = (("rill-engine-secret", secret),
          ("traceparent", "00-%s-%s-01" % (TRACE_C, PARENT_C)), ("tracestate", "gw=1"))
    completes = [r.complete for r in stub.Generate(req, metadata=md, timeout=120)
                 if r.WhichOneof("response") == "complete"]
    if len(completes) != 2:
        fail("VllmEngine/Generate n=2 gave %d completes" % len(completes))
    spans = wait_for_trace(rec, lambda svc, s: s["traceId"] == TRACE_C, count=6)
    if any(svc != "rill-engine" for svc, _ in spans):
        fail("VllmEngine trace has spans of %s" % sorted({svc for svc, _ in spans}))
    names = sorted(s["name"] for _, s in spans)
    if names != sorted(ENGINE_SPANS * 2):
        fail("VllmEngine trace: spans %s, want queue, prefill, decode per sample" % names)
    for _, s in spans:
        if s.get("parentSpanId") != PARENT_C or s.get("traceState") != "gw=1":
            fail("VllmEngine span %s: parent %s state %s, want %s gw=1" % (
                s["name"], s.get("parentSpanId"), s.get("traceState"), PARENT_C))
        if attr(s, "gen_ai.request.id") != "vllm-traced" or attr(s, "gen_ai.request.n") != 2 or \
                attr(s, "gen_ai.usage.prompt_tokens") != len(PROMPT):
            fail("VllmEngine span %s attributes %s" % (s["name"], s["attributes"]))
    for _, d in spans:
        if d["name"] == "decode" and attr(d, "gen_ai.usage.completion_tokens") != MAX_TOKENS:
            fail("VllmEngine decode span: completion tokens %s, want %d per sample" % (
                attr(d, "gen_ai.usage.completion_tokens"), MAX_TOKENS))


def main():
    ap = argparse.ArgumentParser()
    add_serve_args(ap)
    ap.add_argument("--smg_proto_dir", required=True, help="proto/smg (VllmEngine's .proto files)")
    args = ap.parse_args()

    import grpc
    m = load_stubs(args.proto_dir)
    pb, pbg = m["inference_pb2"], m["inference_pb2_grpc"]

    rec = Recorder()
    threading.Thread(target=rec.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d" % rec.server_address[1]
    run_dir = tempfile.mkdtemp(prefix="rill_traces_")
    serve, ready = start_serve(args, run_dir, "--otlp_traces_endpoint=" + endpoint)
    try:
        target = wait_for_serve(serve, ready)
        stub = pbg.InferenceStub(grpc.insecure_channel(target))

        config = stub.GetServerConfig(pb.GetServerConfigRequest(), timeout=30)
        if not config.is_tracing_enabled:
            fail("GetServerConfig: is_tracing_enabled is false with --otlp_traces_endpoint")
        if config.engine_options.get("otlp_traces_endpoint") != endpoint:
            fail("engine_options[otlp_traces_endpoint] = %r" % config.engine_options.get("otlp_traces_endpoint"))

        generate(pb, stub, "in-headers",
                 trace_headers={"traceparent": "00-%s-%s-01" % (TRACE_A, PARENT_A), "tracestate": "k=v"})
        generate(pb, stub, "in-metadata", metadata=[("traceparent", "00-%s-%s-01" % (TRACE_B, PARENT_B))])
        generate(pb, stub, "no-parent")
        generate(pb, stub, "bad-parent", trace_headers={"traceparent": "00-%s-%s-01" % ("0" * 32, PARENT_A)})

        front = check_request_trace(rec, TRACE_A, PARENT_A, "trace_headers")
        if front.get("traceState") != "k=v":
            fail("tracestate not kept: %s" % front.get("traceState"))
        check_request_trace(rec, TRACE_B, PARENT_B, "metadata")
        for rid in ("no-parent", "bad-parent"):
            roots = wait_for_trace(rec, lambda svc, s, rid=rid: svc == "rill-frontend" and
                                   attr(s, "gen_ai.request.id") == rid, deadline_s=5)
            if len(roots) != 1:
                fail("%s: want one llm_request, got %s" % (rid, roots))
            trace_id = roots[0][1]["traceId"]
            if trace_id in (TRACE_A, TRACE_B, "0" * 32) or len(trace_id) != 32:
                fail("%s: not a fresh trace id: %s" % (rid, trace_id))
            check_request_trace(rec, trace_id, None, rid)
        check_vllm_trace(rec, args.smg_proto_dir, args.proto_dir, run_dir)
        with rec.lock:
            if rec.errors:
                fail("bad export requests: %s" % rec.errors)
            total = len(rec.spans)

        # A dead collector: requests are served as before, without delay.
        rec.shutdown()
        rec.server_close()
        t0 = time.time()
        for i in range(3):
            generate(pb, stub, "collector-down-%d" % i, timeout=30,
                     trace_headers={"traceparent": "00-%s-%s-01" % (TRACE_A, PARENT_A)})
        took = time.time() - t0
        if took > 20:
            fail("3 requests took %.1fs with the collector down" % took)
        print("traces e2e: %d spans recorded; 3 requests in %.2fs with the collector down" % (total, took))
    finally:
        stop_serve(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
