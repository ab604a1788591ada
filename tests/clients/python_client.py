#!/usr/bin/env python3
"""Reference Python client for rill.v1.Inference (also a smoke test).

Generates the gRPC stubs from proto/ with grpc_tools.protoc into a temporary
directory at run time, then against --target: streams two generations on one
Generate stream, aborts one mid-way, reads the model/server config, the
rill CheckHealth and the standard grpc health. Exits non-zero on failure.

  python tests/clients/python_client.py --target 127.0.0.1:50051 --proto_dir proto
"""
import argparse
import importlib
import json
import os
import queue
import sys
import tempfile
import time


def load_stubs(proto_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="rill_stubs_")
    files = ["rill/v1/inference.proto", "rill/v1/admin.proto", "grpc/health/v1/health.proto"]
    rc = protoc.main(["protoc", "-I" + proto_dir, "--python_out=" + out, "--grpc_python_out=" + out] + files)
    if rc != 0:
        raise RuntimeError("protoc failed: %d" % rc)
    sys.path.insert(0, out)
    mods = {}
    for name in ["rill.v1.inference_pb2", "rill.v1.inference_pb2_grpc",
                 "grpc.health.v1.health_pb2", "grpc.health.v1.health_pb2_grpc"]:
        mods[name.split(".")[-1]] = importlib.import_module(name)
    return mods


def add_serve_args(ap):
    """The flags of a test that starts `rill serve` (see start_serve)."""
    ap.add_argument("--rill", required=True, help="the rill binary")
    ap.add_argument("--engine_binary", required=True)
    ap.add_argument("--frontend_binary", required=True)
    ap.add_argument("--proto_dir", required=True)


def start_serve(args, run_dir, *flags):
    """`rill serve` (args from add_serve_args) on a free port with 2 threads,
    its files and child logs in `run_dir`, plus `flags`. Returns (process,
    ready file) for wait_for_serve."""
    import subprocess
    ready = os.path.join(run_dir, "ready")
    proc = subprocess.Popen(
        [args.rill, "serve", "--port=0", "--threads=2"] + list(flags) +
        ["--ready_file=" + ready, "--run_dir=" + run_dir, "--log_to_files",
         "--engine_binary=" + args.engine_binary, "--frontend_binary=" + args.frontend_binary])
    return proc, ready


def wait_for_serve(proc, ready_file, timeout_s=180):
    """The client target a `rill serve --ready_file=...` process writes once
    it serves; AssertionError if it exits or is not ready in time."""
    deadline = time.time() + timeout_s
    while not os.path.exists(ready_file):
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError("rill serve did not become ready (exit %s)" % proc.poll())
        time.sleep(0.2)
    time.sleep(0.1)
    return open(ready_file).read().strip()


def stop_serve(proc, timeout_s=60):
    """SIGTERM (a graceful drain), then SIGKILL after `timeout_s`."""
    import signal
    import subprocess
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()


def request_iterator(outbox):
    """Yields the messages put in `outbox` (a queue.Queue) until None: a
    Generate stream's request side that half-closes on None."""
    while True:
        item = outbox.get()
        if item is None:
            return
        yield item


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--proto_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "proto"))
    ap.add_argument("--prompt", default="Hello, my name is")
    ap.add_argument("--max_tokens", type=int, default=12)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()

    import grpc
    m = load_stubs(args.proto_dir)
    pb, pbg = m["inference_pb2"], m["inference_pb2_grpc"]
    channel = grpc.insecure_channel(args.target)
    grpc.channel_ready_future(channel).result(timeout=args.timeout)
    stub = pbg.InferenceStub(channel)

    outbox = queue.Queue()

    def start(rid, max_tokens, ignore_eos=False):
        return pb.GenerateRequest(start=pb.StartRequest(
            request_id=rid, text=args.prompt,
            sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0.0,
                                       ignore_eos=ignore_eos)))

    outbox.put(start("py-full", args.max_tokens))
    # Long enough that only the abort can end it (within any context length).
    outbox.put(start("py-abort", 4000, ignore_eos=True))
    texts = {"py-full": "", "py-abort": ""}
    final = {}
    aborted_sent = False
    for resp in stub.Generate(request_iterator(outbox), timeout=args.timeout):
        if resp.status.code != 0:
            raise RuntimeError("request %s failed: %s" % (resp.request_id, resp.status.message))
        for c in resp.outputs:
            texts[resp.request_id] += c.text
            if c.finish_reason:
                final[resp.request_id] = pb.FinishReason.Name(c.finish_reason)
        if resp.request_id == "py-abort" and resp.outputs and not aborted_sent:
            outbox.put(pb.GenerateRequest(abort=pb.AbortRequest(request_id="py-abort")))
            aborted_sent = True
        if len(final) == 2:
            outbox.put(None)  # Half-close: the stream ends.
    assert final.get("py-full") in ("FINISH_REASON_LENGTH", "FINISH_REASON_STOP"), final
    assert final.get("py-abort") == "FINISH_REASON_ABORT", final

    model = stub.GetModelConfig(pb.GetModelConfigRequest(), timeout=args.timeout)
    server = stub.GetServerConfig(pb.GetServerConfigRequest(), timeout=args.timeout)
    health = stub.CheckHealth(pb.CheckHealthRequest(), timeout=args.timeout)
    hs = m["health_pb2_grpc"].HealthStub(channel).Check(m["health_pb2"].HealthCheckRequest(), timeout=args.timeout)
    assert health.healthy
    assert hs.status == m["health_pb2"].HealthCheckResponse.SERVING
    print(json.dumps({
        "texts": texts, "finish": final, "vocab_size": model.vocab_size,
        "max_model_len": model.max_model_len, "backend": server.engine.backend,
        "healthy": health.healthy,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
