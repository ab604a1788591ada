#!/usr/bin/env python3
"""/metrics of a running `rill serve`, checked with prometheus_client's parser.

Starts `rill serve --metrics_port=P --admin_token=...`, then:
1. every family the engine and the frontend promise is present with its
   type and labels (vLLM's names on the engine);
2. a known workload on one Generate stream (N requests of a known prompt
   length with max_tokens and ignore_eos, K aborted after their first
   token, one invalid) moves the counters and histogram counts by exactly
   what was sent; running, waiting and KV usage go back to 0;
3. Admin.GetStats on the engine agrees with /metrics;
4. after the engine is killed, `rill serve` restarts it and the new one's
   rill:engine_restarts_total is 1 (0 before).
Exits non-zero with the reason on any mismatch.
"""
import argparse
import os
import queue
import socket
import sys
import tempfile
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients"))
from python_client import (add_serve_args, load_stubs, request_iterator, start_serve,  # noqa: E402
                           stop_serve, wait_for_serve)

# family name (as the parser names it) -> (type, labels besides le)
ENGINE_FAMILIES = {
    "vllm:num_requests_running": ("gauge", {"model_name"}),
    "vllm:num_requests_waiting": ("gauge", {"model_name"}),
    "vllm:kv_cache_usage_perc": ("gauge", {"model_name"}),
    "vllm:lora_requests_info": ("gauge", {"max_lora", "running_lora_adapters", "waiting_lora_adapters"}),
    "vllm:cache_config_info": ("gauge", {"model_name", "block_size", "cache_dtype",
                                         "enable_prefix_caching", "num_gpu_blocks", "kv_cache_bytes"}),
    "vllm:prompt_tokens": ("counter", {"model_name"}),
    "vllm:generation_tokens": ("counter", {"model_name"}),
    "vllm:request_success": ("counter", {"model_name", "finished_reason"}),
    "vllm:num_preemptions": ("counter", {"model_name"}),
    "vllm:prefix_cache_queries": ("counter", {"model_name"}),
    "vllm:prefix_cache_hits": ("counter", {"model_name"}),
    "vllm:time_to_first_token_seconds": ("histogram", {"model_name"}),
    "vllm:inter_token_latency_seconds": ("histogram", {"model_name"}),
    "vllm:e2e_request_latency_seconds": ("histogram", {"model_name"}),
    "vllm:request_queue_time_seconds": ("histogram", {"model_name"}),
    "vllm:request_prefill_time_seconds": ("histogram", {"model_name"}),
    "vllm:request_decode_time_seconds": ("histogram", {"model_name"}),
    "vllm:request_inference_time_seconds": ("histogram", {"model_name"}),
    "vllm:request_prompt_tokens": ("histogram", {"model_name"}),
    "vllm:request_generation_tokens": ("histogram", {"model_name"}),
    "vllm:iteration_tokens_total": ("histogram", {"model_name"}),
    "rill:prompt_tokens_computed": ("counter", {"model_name"}),
    "rill:engine_steps": ("counter", {"model_name"}),
    "rill:engine_step_seconds": ("histogram", {"model_name"}),
    "rill:model_execute_seconds": ("histogram", {"model_name"}),
    "rill:sampler_seconds": ("histogram", {"model_name"}),
    "rill:engine_batch_size": ("histogram", {"model_name"}),
    "rill:engine_sleeping": ("gauge", {"model_name"}),
    "rill:tp_collective_seconds": ("histogram", {"model_name"}),
    "rill:engine_restarts": ("counter", {"model_name"}),
    "rill:device_sampling_rows": ("counter", {"model_name", "where"}),
}
FRONTEND_FAMILIES = {
    "rill:frontend_active_streams": ("gauge", {"frontend_id"}),
    "rill:frontend_requests": ("counter", {"frontend_id", "code"}),
    "rill:frontend_tokenization_seconds": ("histogram", {"frontend_id"}),
    "rill:frontend_send_buffer_bytes": ("gauge", {"frontend_id"}),
    "rill:frontend_slow_client_terminations": ("counter", {"frontend_id"}),
}

PROMPT = list(range(100, 117))  # 17 token ids
N, K = 4, 2
MAX_TOKENS = [3, 5, 8, 13]


def fail(msg):
    raise AssertionError(msg)


def free_port_pair():
    """A port P with P+1 also free (engine, frontend 0)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            p = a.getsockname()[1]
            if p >= 65535:
                continue
            try:
                with socket.socket() as b:
                    b.bind(("127.0.0.1", p + 1))
                    return p
            except OSError:
                continue
    fail("no free port pair")


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            fail("Content-Type %r" % ctype)
        return {f.name: f for f in text_string_to_metric_families(r.read().decode())}


def value(families, name, sample=None, **labels):
    """The sample `sample` (default: name, or name_total for counters) with these labels."""
    fam = families[name]
    want = sample or (name + "_total" if fam.type == "counter" else name)
    total = 0.0
    found = False
    for s in fam.samples:
        if s.name == want and all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
            found = True
    if not found and not labels:
        fail("%s has no sample %s" % (name, want))
    return total


def check_families(families, expected, where):
    for name, (typ, labels) in expected.items():
        if name not in families:
            fail("%s: family %s missing (have %s)" % (where, name, sorted(families)))
        fam = families[name]
        if fam.type != typ:
            fail("%s: %s is a %s, want %s" % (where, name, fam.type, typ))
        if not fam.samples:
            fail("%s: %s has no samples" % (where, name))
        for s in fam.samples:
            got = set(s.labels) - {"le"}
            if got != labels:
                fail("%s: %s sample %s has labels %s, want %s" % (where, name, s.name, sorted(got), sorted(labels)))
        if typ == "histogram":
            les = [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")]
            if "+Inf" not in les:
                fail("%s: %s has no +Inf bucket" % (where, name))


def check_dashboard(path, families):
    """Every metric the Grafana dashboard queries is one the processes export."""
    import json
    import re
    dash = json.load(open(path))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    names = set(re.findall(r"\b((?:vllm|rill):[a-z0-9_]+)", " ".join(exprs)))
    if not names:
        fail("the dashboard queries no metric")
    for n in sorted(names):
        base = re.sub(r"_(bucket|sum|count|total)$", "", n)
        if n not in families and base not in families:
            fail("dashboard %s queries %s, which neither process exports" % (path, n))


def run_workload(pb, stub):
    outbox = queue.Queue()

    def start(rid, max_tokens):
        return pb.GenerateRequest(start=pb.StartRequest(
            request_id=rid, token_ids=pb.TokenIds(ids=PROMPT),
            sampling=pb.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)))

    for i in range(N):
        outbox.put(start("ok-%d" % i, MAX_TOKENS[i]))
    for i in range(K):
        outbox.put(start("abort-%d" % i, 4000))
    bad = start("invalid", 4)
    bad.start.sampling.temperature = -1.0
    outbox.put(bad)
    tokens = {}
    finish = {}
    codes = {}
    aborted = set()
    for resp in stub.Generate(request_iterator(outbox), timeout=300):
        rid = resp.request_id
        for c in resp.outputs:
            tokens[rid] = tokens.get(rid, 0) + len(c.token_ids)
            if c.finish_reason:
                finish[rid] = pb.FinishReason.Name(c.finish_reason)
        if rid.startswith("abort-") and resp.outputs and rid not in aborted:
            outbox.put(pb.GenerateRequest(abort=pb.AbortRequest(request_id=rid)))
            aborted.add(rid)
        if resp.finished:
            codes[rid] = resp.status.code
            if len(codes) == N + K + 1:
                outbox.put(None)
    for i in range(N):
        if finish.get("ok-%d" % i) != "FINISH_REASON_LENGTH" or tokens["ok-%d" % i] != MAX_TOKENS[i]:
            fail("ok-%d: %s with %s tokens" % (i, finish.get("ok-%d" % i), tokens.get("ok-%d" % i)))
    for i in range(K):
        if finish.get("abort-%d" % i) != "FINISH_REASON_ABORT":
            fail("abort-%d ended %s" % (i, finish.get("abort-%d" % i)))
    if codes.get("invalid") != 3:  # INVALID_ARGUMENT
        fail("invalid request got code %s" % codes.get("invalid"))
    return sum(tokens.get("abort-%d" % i, 0) for i in range(K))


def engine_pid(serve, engine_binary):
    """The pid of `rill serve`'s rill-engine child."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == serve.pid and os.path.basename(argv0) == os.path.basename(engine_binary):
            return int(pid)
    fail("no rill-engine child of rill serve (pid %d)" % serve.pid)


def check_engine_restart(serve, engine_binary, mport):
    """Kills the engine; `rill serve` starts a new one, whose /metrics counts it."""
    import signal
    old = engine_pid(serve, engine_binary)
    os.kill(old, signal.SIGKILL)
    deadline = time.time() + 120
    last = "no scrape yet"
    while time.time() < deadline:
        if serve.poll() is not None:
            fail("rill serve exited (%s) after the engine was killed" % serve.returncode)
        try:
            families = scrape(mport)
            if "rill:engine_restarts" in families:
                restarts = value(families, "rill:engine_restarts")
                if restarts == 1:
                    print("engine restart: pid %d killed, rill:engine_restarts_total = 1" % old)
                    return
                last = "rill:engine_restarts_total = %s" % restarts
            else:
                last = "no rill:engine_restarts family"
        except OSError as e:  # The new engine is not listening yet.
            last = repr(e)
        time.sleep(0.5)
    fail("after killing the engine (pid %d): %s" % (old, last))


def main():
    ap = argparse.ArgumentParser()
    add_serve_args(ap)
    ap.add_argument("--dashboard", required=True)
    args = ap.parse_args()

    import grpc
    m = load_stubs(args.proto_dir)
    pb, pbg = m["inference_pb2"], m["inference_pb2_grpc"]
    import importlib
    admin_pb = importlib.import_module("rill.v1.admin_pb2")
    admin_pbg = importlib.import_module("rill.v1.admin_pb2_grpc")

    mport = free_port_pair()
    run_dir = tempfile.mkdtemp(prefix="rill_metrics_")
    token = "metrics-test-token"
    serve, ready = start_serve(args, run_dir, "--metrics_port=%d" % mport, "--admin_token=" + token,
                               "--log_requests")
    try:
        target = wait_for_serve(serve, ready)
        engine_port = int(open(os.path.join(run_dir, "engine.port")).read().strip())

        before_e = scrape(mport)
        before_f = scrape(mport + 1)
        check_families(before_e, ENGINE_FAMILIES, "engine")
        check_families(before_f, FRONTEND_FAMILIES, "frontend")

        channel = grpc.insecure_channel(target)
        # The aborted requests may have generated a token or two more than
        # the client saw (in flight when the abort arrived).
        aborted_seen = run_workload(pb, pbg.InferenceStub(channel))

        # The gauges are published after each loop iteration: wait for idle.
        deadline = time.time() + 30
        while True:
            after_e = scrape(mport)
            after_f = scrape(mport + 1)
            idle = (value(after_e, "vllm:num_requests_running") == 0 and
                    value(after_e, "vllm:num_requests_waiting") == 0 and
                    value(after_e, "vllm:kv_cache_usage_perc") == 0 and
                    value(after_f, "rill:frontend_active_streams") == 0 and
                    value(after_f, "rill:frontend_send_buffer_bytes") == 0)
            if idle:
                break
            if time.time() > deadline:
                fail("not idle after the workload: running %s waiting %s kv %s streams %s" % (
                    value(after_e, "vllm:num_requests_running"),
                    value(after_e, "vllm:num_requests_waiting"),
                    value(after_e, "vllm:kv_cache_usage_perc"),
                    value(after_f, "rill:frontend_active_streams")))
            time.sleep(0.2)
        check_families(after_e, ENGINE_FAMILIES, "engine")
        check_dashboard(args.dashboard, dict(after_e, **after_f))

        def delta(name, sample=None, **labels):
            return value(after_e, name, sample, **labels) - value(before_e, name, sample, **labels)

        def fdelta(name, **labels):
            return value(after_f, name, **labels) - value(before_f, name, **labels)

        ended = N + K
        generated = delta("vllm:generation_tokens")
        aborted_generated = generated - sum(MAX_TOKENS)
        if not aborted_seen <= aborted_generated <= aborted_seen + 4 * K:
            fail("generation_tokens: %s, want %d for the finished requests + %d..%d for the aborted" % (
                generated, sum(MAX_TOKENS), aborted_seen, aborted_seen + 4 * K))
        expect = [
            ("request_success{length}", delta("vllm:request_success", finished_reason="length"), N),
            ("request_success{abort}", delta("vllm:request_success", finished_reason="abort"), K),
            ("request_success{stop}", delta("vllm:request_success", finished_reason="stop"), 0),
            ("request_success{error}", delta("vllm:request_success", finished_reason="error"), 0),
            ("prompt_tokens", delta("vllm:prompt_tokens"), ended * len(PROMPT)),
            ("ttft count", delta("vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count"), ended),
            ("e2e count", delta("vllm:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds_count"), ended),
            ("queue count", delta("vllm:request_queue_time_seconds", "vllm:request_queue_time_seconds_count"), ended),
            ("prefill count", delta("vllm:request_prefill_time_seconds", "vllm:request_prefill_time_seconds_count"), ended),
            ("decode count", delta("vllm:request_decode_time_seconds", "vllm:request_decode_time_seconds_count"), ended),
            ("itl count", delta("vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count"), generated - ended),
            ("request_prompt_tokens sum", delta("vllm:request_prompt_tokens", "vllm:request_prompt_tokens_sum"), ended * len(PROMPT)),
            ("request_generation_tokens sum", delta("vllm:request_generation_tokens", "vllm:request_generation_tokens_sum"), generated),
            ("request_generation_tokens count", delta("vllm:request_generation_tokens", "vllm:request_generation_tokens_count"), ended),
            ("iteration_tokens count == steps", delta("vllm:iteration_tokens_total", "vllm:iteration_tokens_total_count"), delta("rill:engine_steps")),
            ("frontend OK", fdelta("rill:frontend_requests", code="OK"), ended),
            ("frontend INVALID_ARGUMENT", fdelta("rill:frontend_requests", code="INVALID_ARGUMENT"), 1),
        ]
        # Every prompt has 17 tokens: none in the le=10 bucket, all in le=20.
        expect.append(("request_prompt_tokens le=10",
                       delta("vllm:request_prompt_tokens", "vllm:request_prompt_tokens_bucket", le="10"), 0))
        expect.append(("request_prompt_tokens le=20",
                       delta("vllm:request_prompt_tokens", "vllm:request_prompt_tokens_bucket", le="20"), ended))
        errors = []
        for what, got, want in expect:
            if want is not None and got != want:
                errors.append("%s: got %s, want %s" % (what, got, want))
        if delta("vllm:iteration_tokens_total", "vllm:iteration_tokens_total_count") <= 0:
            errors.append("no engine step was observed")
        if errors:
            fail("; ".join(errors))

        # Admin.GetStats reads the same counters.
        admin = admin_pbg.AdminStub(grpc.insecure_channel("127.0.0.1:%d" % engine_port))
        stats = admin.GetStats(admin_pb.GetStatsRequest(), timeout=30,
                               metadata=[("authorization", "Bearer " + token)])
        now = scrape(mport)
        pairs = [
            ("requests_finished_total", stats.requests_finished_total,
             value(now, "vllm:request_success", finished_reason="length") + value(now, "vllm:request_success", finished_reason="stop")),
            ("requests_aborted_total", stats.requests_aborted_total, value(now, "vllm:request_success", finished_reason="abort")),
            ("requests_failed_total", stats.requests_failed_total, value(now, "vllm:request_success", finished_reason="error")),
            ("generation_tokens_total", stats.generation_tokens_total, value(now, "vllm:generation_tokens")),
            ("prompt_tokens_total", stats.prompt_tokens_total, value(now, "rill:prompt_tokens_computed")),
            ("preemptions_total", stats.preemptions_total, value(now, "vllm:num_preemptions")),
            ("steps_total", stats.steps_total, value(now, "rill:engine_steps")),
            ("tp_collective_seconds_total", stats.tp_collective_seconds_total,
             value(now, "rill:tp_collective_seconds", "rill:tp_collective_seconds_sum")),
            ("engine_restarts_total", stats.engine_restarts_total, value(now, "rill:engine_restarts")),
        ]
        bad = ["%s: GetStats %s, /metrics %s" % (n, a, b) for n, a, b in pairs if a != b]
        if bad:
            fail("; ".join(bad))
        if stats.requests_finished_total < N or stats.generation_tokens_total < generated:
            fail("GetStats counters did not count the workload: %s" % stats)
        # One rank: no collective is observed. Not restarted yet.
        if value(now, "rill:tp_collective_seconds", "rill:tp_collective_seconds_count") != 0:
            fail("rill:tp_collective_seconds observed steps at tensor_parallel_size 1")
        if value(now, "rill:engine_restarts") != 0:
            fail("rill:engine_restarts_total is %s before any restart" % value(now, "rill:engine_restarts"))
        print("metrics e2e: %d requests, %d generated tokens, all counters match" % (ended, generated))
        check_engine_restart(serve, args.engine_binary, mport)
    finally:
        stop_serve(serve)
        log = os.path.join(run_dir, "engine.log")
        if os.path.exists(log):
            lines = [l for l in open(log) if "finished: reason=" in l]
            print("engine request log lines: %d, e.g.\n%s" % (len(lines), lines[0] if lines else ""))
            if len(lines) < N + K:
                print("".join(open(log).readlines()[-40:]))
                fail("--log_requests wrote %d lines, want >= %d" % (len(lines), N + K))
    return 0


if __name__ == "__main__":
    sys.exit(main())
