#!/usr/bin/env python3
"""`rill serve --engines=2 --openai_port` through the openai SDK: the gateway's
cache-aware routing keeps requests that share a long prefix on the engine
that holds it and spreads unrelated ones (seen in each engine's KV events,
VllmEngine/SubscribeKvEvents), after an engine is killed the others serve
(--phase failover), and once rill serve has restarted it the gateway routes
to it again (--phase recovered: requests land on it, seen in its KV events).
Exit code: the number of failed checks.
"""
import argparse
import importlib
import sys
import tempfile
import threading
import time

import grpc
import openai

from check_report import check, summary


class StoredCounter:
    """Counts the blocks an engine stores, from its KV event stream."""

    def __init__(self, address, m):
        self.count = 0
        channel = grpc.insecure_channel(address)
        stub = m["vllm_engine_pb2_grpc"].VllmEngineStub(channel)
        self.call = stub.SubscribeKvEvents(m["common_pb2"].SubscribeKvEventsRequest(), timeout=600)
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        try:
            for b in self.call:
                for e in b.events:
                    if e.WhichOneof("data") == "stored":
                        self.count += len(e.stored.blocks)
        except grpc.RpcError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base_url", required=True)
    ap.add_argument("--engines", required=True, help="comma-separated host:port")
    ap.add_argument("--smg_proto_dir", default="proto/smg")
    ap.add_argument("--phase", choices=["affinity", "failover", "recovered"], required=True)
    ap.add_argument("--restarted", help="host:port of the restarted engine (--phase recovered)")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", timeout=120, max_retries=0)
    model = client.models.list().data[0].id

    if args.phase == "failover":
        ok = 0
        for i in range(6):
            r = client.completions.create(model=model, prompt="Failover request %d:" % i,
                                          max_tokens=2, temperature=0)
            ok += r.choices[0].finish_reason in ("length", "stop")
        check("after an engine died the others serve every request", ok == 6, ok)
        return summary()

    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="vllm_stubs_")
    protoc.main(["protoc", "-I" + args.smg_proto_dir, "--python_out=" + out,
                 "--grpc_python_out=" + out, "common.proto", "vllm_engine.proto"])
    sys.path.insert(0, out)
    m = {n: importlib.import_module(n) for n in ["common_pb2", "vllm_engine_pb2_grpc"]}

    if args.phase == "recovered":
        # The gateway takes the engine back once it answers its KV-event
        # subscription and health checks again: give it a while.
        counter = StoredCounter(args.restarted, m)
        sent = ok = 0
        deadline = time.time() + 120
        while counter.count == 0 and time.time() < deadline:
            r = client.completions.create(
                model=model, max_tokens=1, temperature=0,
                prompt="Recovery probe %d: %s" % (sent, " ".join("r%d_%d" % (sent, k) for k in range(40))))
            sent += 1
            ok += r.choices[0].finish_reason in ("length", "stop")
            time.sleep(0.5)
        time.sleep(0.5)
        print("requests until the restarted engine stored blocks: %d (%d blocks)"
              % (sent, counter.count), flush=True)
        check("every request succeeded while the engine came back", ok == sent, (ok, sent))
        check("the gateway routes to the restarted engine again", counter.count > 0, sent)
        counter.call.cancel()
        return summary()
    counters = [StoredCounter(a, m) for a in args.engines.split(",")]
    time.sleep(1.0)

    def stored():
        time.sleep(0.5)  # The events of the last request arrive.
        return [c.count for c in counters]

    shared = ("Background for every question below. " +
              "The river flows from the mountains through the valley to the sea, " * 12)
    before = stored()
    for i in range(6):
        client.completions.create(model=model, prompt=shared + "Question %d: why?" % i,
                                  max_tokens=1, temperature=0)
    after = stored()
    grew = [a - b for a, b in zip(after, before)]
    print("blocks stored per engine for 6 prompts sharing a prefix:", grew, flush=True)
    check("shared prefix: one engine holds it (the other stored almost nothing)",
          max(grew) >= 5 and min(grew) <= max(grew) // 4, grew)

    before = stored()
    for i in range(10):
        client.completions.create(
            model=model, max_tokens=1, temperature=0,
            prompt="Unrelated topic %d: %s" % (i, " ".join(["w%d_%d" % (i, k) for k in range(40)])))
    after = stored()
    spread = [a - b for a, b in zip(after, before)]
    print("blocks stored per engine for 10 unrelated prompts:", spread, flush=True)
    check("unrelated prompts spread over the engines", min(spread) > 0, spread)
    for c in counters:
        c.call.cancel()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
