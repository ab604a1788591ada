#!/usr/bin/env python3
"""The gateway comparison (issue 29): the same workload -- the shipped prompts
(bench/serve_bench/data/prompts.jsonl, in order), greedy, exactly each
prompt's output_len tokens (32-128; or all --output-len) with ignore_eos and
min_tokens = max_tokens, streamed, at each concurrency level -- through

  (a) Rill's native gRPC frontend          driven by rill-bench-serve
  (b) smg + Rill (`rill serve --openai_port`) driven by rill-bench-serve
                                              (--backend=openai) and aiperf
  (c) llama-server's OpenAI endpoint        driven by aiperf (and
                                              rill-bench-serve as a cross-check)

aiperf is the independent OpenAI-API load generator, pinned in
bench/requirements-loadgen.txt and installed into its own venv by
bench/setup_loadgen.sh (not the project venv: CI never installs it).
One `rill serve` process serves (a) and (b), so they share the engine; then
llama-server starts with the same GGUF and threads. Each run (system, client,
level) sends its own copy of the prompts, tagged with a run number, so no run
hits another's prompts in a server's prefix cache. Prints one table (output
tok/s, TTFT and ITL p50/p90/p99 per system, generator and level) and the
issue's two ratios against their targets:
  * the gateway's overhead over native gRPC, same client (rill-bench-serve):
    <= 5 % output tok/s at every level, <= 2 ms TTFT p50 at c=1;
  * Rill via smg vs llama-server, same client (aiperf): >= 1.5x output tok/s
    at c=16 and c=64.
Writes bench/out/gateway_compare/compare.json (and each client's own output).
Its c=1 TTFT check is one p50 per side over prompts of very different
lengths; bench/gateway_ttft_breakdown.py pairs the two sides request by
request and splits the difference by layer (frontend, engine, smg).

  bash bench/setup_loadgen.sh        # once: bench/.venv-loadgen with aiperf
  .venv/bin/python bench/gateway_compare.py --concurrency 1,16,64 --num-requests 64

Needs bazel-bin/cli/rill (+ rill-engine, rill-frontend, rill-worker),
bazel-bin/bench/serve_bench/rill-bench-serve, llama-server
(bench/build_llama_cpp.sh) and the smg protos (tools/setup.sh).
"""
import argparse
import io
import json
import os
import signal
import subprocess
import sys
import urllib.request
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402  (server start/stop helpers)

ROOT = serve_bench.ROOT
NATIVE, GATEWAY, LLAMA = "native gRPC", "smg + Rill", "llama-server /v1"
BENCH_SERVE, AIPERF = "rill-bench-serve", "aiperf"
PERCENTILES = ("p50", "p90", "p99")


def model_id(openai_base):
    with urllib.request.urlopen(f"{openai_base}/v1/models", timeout=30) as r:
        return json.load(r)["data"][0]["id"]


def write_tokenizer(run_dir, out_dir, proto_dir):
    """The tokenizer files smg itself uses (the engine's VllmEngine.GetTokenizer,
    which `rill serve --openai_port` serves without credentials on loopback),
    unzipped for aiperf, which needs a Hugging Face tokenizer and should not
    need the Hub."""
    import grpc
    sys.path.insert(0, os.path.join(ROOT, "tests/clients"))
    from vllm_engine_conformance import load_stubs
    m = load_stubs(os.path.join(proto_dir, "smg"), proto_dir)
    with open(os.path.join(run_dir, "engine.port")) as f:
        port = f.read().strip()
    stub = m["vllm_engine_pb2_grpc"].VllmEngineStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    blob = b"".join(c.data for c in stub.GetTokenizer(m["common_pb2"].GetTokenizerRequest(),
                                                     timeout=60))
    path = os.path.join(out_dir, "tokenizer")
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        z.extractall(path)
    return path


class Datasets:
    """The shipped prompts, in order, with their own output lengths (or all
    --output-len), in rill-bench-serve's JSONL and in aiperf's single_turn
    JSONL (min_tokens = max_tokens per request, as rill-bench-serve asks).
    Every run (system, client, level) gets its own copy whose prompts start
    with a run number, so no run finds another run's prompts in a server's
    prefix cache (the same prompts repeat at every level and client)."""

    def __init__(self, prompts_path, out_dir, output_len, num_requests, warmup):
        self.rows, self.out_dir, self.runs = [], os.path.join(out_dir, "prompts"), 0
        self.num_requests, self.warmup = num_requests, warmup
        os.makedirs(self.out_dir, exist_ok=True)
        with open(prompts_path) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    self.rows.append((row["prompt"], output_len or row["output_len"]))

    def next_run(self, name):
        """(rill-bench-serve file, aiperf file) for a fresh run."""
        self.runs += 1
        tag = f"Request set {self.runs:03d}.\n\n"
        rill_path = os.path.join(self.out_dir, f"{self.runs:03d}-{name}.jsonl")
        aiperf_path = os.path.join(self.out_dir, f"{self.runs:03d}-{name}.aiperf.jsonl")
        with open(rill_path, "w") as rill:
            for prompt, n in self.rows:
                rill.write(json.dumps({"prompt": tag + prompt, "output_len": n}) + "\n")
        # rill-bench-serve measures lines 0..N-1 and warms up on the next W;
        # aiperf sends the file in order, warm-up first: so the W warm-up
        # lines go first, and both clients measure the same N prompts.
        count, n_req = len(self.rows), self.num_requests
        order = ([(n_req + i) % count for i in range(self.warmup)] +
                 [i % count for i in range(n_req)])
        with open(aiperf_path, "w") as ai:
            for i in order:
                prompt, n = self.rows[i]
                ai.write(json.dumps({"text": tag + prompt, "output_length": n,
                                     "extra": {"min_tokens": n}}) + "\n")
        return rill_path, aiperf_path


def run_bench_serve(args, datasets, backend, address, name, concurrency, extra=()):
    dataset, _ = datasets.next_run(f"{name}-c{concurrency}")
    out_json = os.path.join(args.out_dir, f"bench_serve_{name}-c{concurrency}.json")
    flags = [f"--concurrency={concurrency}", f"--num_requests={args.num_requests}",
             f"--dataset={dataset}", f"--warmup_requests={args.warmup_requests}", "--seed=1",
             "--progress=false"]
    l = serve_bench.run_client(backend, address, out_json, flags + list(extra))["levels"][0]
    return {"concurrency": l["concurrency"], "completed": l["completed"], "errors": l["errors"],
            "first_errors": l["first_errors"], "output_tok_s": l["output_tokens_per_s"],
            "tokens_per_request": l["output_tokens"] / l["completed"] if l["completed"] else 0,
            **{f"ttft_{p}_ms": l["ttft"][f"{p}_ms"] for p in PERCENTILES},
            **{f"itl_{p}_ms": l["itl"][f"{p}_ms"] for p in PERCENTILES}}


def run_aiperf(args, datasets, url, model, tokenizer, name, concurrency):
    _, dataset = datasets.next_run(f"{name}-aiperf-c{concurrency}")
    artifacts = os.path.join(args.out_dir, "aiperf", f"{name}-c{concurrency}")
    extra = {"ignore_eos": True, "temperature": 0}  # max/min_tokens: per row, from the dataset
    cmd = serve_bench.CLIENT_PREFIX + [args.aiperf, "profile", "--model", model, "--url", url,
           "--endpoint-type", "completions", "--streaming",
           "--tokenizer", tokenizer, "--use-server-token-count",
           "--input-file", dataset, "--custom-dataset-type", "single_turn",
           "--concurrency", str(concurrency), "--request-count", str(args.num_requests),
           "--warmup-request-count", str(args.warmup_requests),
           "--extra-inputs", json.dumps(extra),
           "--random-seed", "1", "--artifact-dir", artifacts, "--ui-type", "none",
           "--no-server-metrics", "--no-gpu-telemetry"] + args.aiperf_arg
    # Not HF_HUB_OFFLINE: aiperf 0.13 then looks a local tokenizer path up in
    # the Hub cache and fails; a local path is read without the network anyway.
    env = dict(os.environ, HF_HUB_DISABLE_TELEMETRY="1")
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    log_path = os.path.join(args.out_dir, f"aiperf-{name}-c{concurrency}.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            rc = proc.wait(args.level_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = "timeout"
    export = os.path.join(artifacts, "profile_export_aiperf.json")
    if rc != 0 or not os.path.exists(export):
        raise SystemExit(f"error: aiperf ({name}, c={concurrency}) ended with {rc}; see {log_path}")
    with open(export) as f:
        m = json.load(f)

    def get(tag, stat):
        v = (m.get(tag) or {}).get(stat)
        return float("nan") if v is None else v

    completed = int(get("request_count", "avg"))
    errors = m.get("error_request_count", {}).get("avg") or 0
    return {"concurrency": concurrency, "completed": completed, "errors": int(errors),
            "first_errors": [str(e)[:200] for e in (m.get("error_summary") or [])[:3]],
            "output_tok_s": get("output_token_throughput", "avg"),
            "tokens_per_request": get("output_sequence_length", "avg"),
            **{f"ttft_{p}_ms": get("time_to_first_token", p) for p in PERCENTILES},
            **{f"itl_{p}_ms": get("inter_token_latency", p) for p in PERCENTILES}}


def parse_cpu_list(text):
    """taskset's list form: "1", "0,2", "2-3"."""
    cpus = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def ratio(a, b):
    return a / b if b else float("nan")


def print_table(rows):
    print("| system | client | conc | ok/err | tok/req | output tok/s | TTFT p50 / p90 / p99 ms "
          "| ITL p50 / p90 / p99 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["concurrency"], r["system"], r["client"])):
        print(f"| {r['system']} | {r['client']} | {r['concurrency']} | {r['completed']}/{r['errors']} "
              f"| {r['tokens_per_request']:.0f} | {r['output_tok_s']:.1f} | "
              + " / ".join(f"{r[f'ttft_{p}_ms']:.1f}" for p in PERCENTILES) + " | "
              + " / ".join(f"{r[f'itl_{p}_ms']:.2f}" for p in PERCENTILES) + " |")


def targets(rows, levels):
    def row(system, client, c):
        return next((r for r in rows if (r["system"], r["client"], r["concurrency"]) ==
                     (system, client, c)), None)

    checks = []
    for c in levels:  # Same client, native vs through the gateway.
        a, b = row(NATIVE, BENCH_SERVE, c), row(GATEWAY, BENCH_SERVE, c)
        if a and b:
            loss = 1 - ratio(b["output_tok_s"], a["output_tok_s"])
            checks.append((f"gateway throughput overhead at c={c} <= 5%", f"{100 * loss:+.1f}%",
                           loss <= 0.05))
    a, b = row(NATIVE, BENCH_SERVE, 1), row(GATEWAY, BENCH_SERVE, 1)
    if a and b:
        delta = b["ttft_p50_ms"] - a["ttft_p50_ms"]
        checks.append(("gateway TTFT p50 overhead at c=1 <= 2 ms", f"{delta:+.2f} ms", delta <= 2))
    for client in (AIPERF, BENCH_SERVE):  # aiperf gives the target; the other cross-checks.
        for c in levels:
            g, l = row(GATEWAY, client, c), row(LLAMA, client, c)
            if g and l:
                x = ratio(g["output_tok_s"], l["output_tok_s"])
                has_target = c in (16, 64)
                checks.append((f"smg + Rill / llama-server output tok/s at c={c}"
                               + (" >= 1.5x" if has_target else "") + f" ({client})",
                               f"{x:.2f}x", x >= 1.5 if has_target else None))
    print("\n| target | measured | met |\n|---|---:|---|")
    for name, value, ok in checks:
        print(f"| {name} | {value} | {'-' if ok is None else 'yes' if ok else 'NO'} |")
    return [{"target": n, "measured": v, "met": ok} for n, v, ok in checks]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=serve_bench.default_model())
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--num-requests", type=int, default=64, help="per level and client")
    ap.add_argument("--warmup-requests", type=int, default=2, help="unrecorded, per level")
    ap.add_argument("--output-len", type=int, default=0,
                    help="output tokens of every request; 0 = each prompt's own output_len")
    ap.add_argument("--level-timeout", type=int, default=900, help="seconds per aiperf level")
    ap.add_argument("--dataset", default=os.path.join(ROOT, "bench/serve_bench/data/prompts.jsonl"))
    ap.add_argument("--engines", type=int, default=1, help="rill serve --engines")
    ap.add_argument("--frontends", type=int, default=1, help="rill serve --frontends")
    ap.add_argument("--rill-engine-flag", action="append", default=[],
                    help="extra rill-engine flag (repeatable)")
    ap.add_argument("--skip-llama", action="store_true", help="only (a) and (b)")
    ap.add_argument("--rill", default=serve_bench.RILL, help="the rill binary (its engine, "
                    "frontend and worker next to it or in bazel-bin)")
    ap.add_argument("--bench-serve", default=serve_bench.BENCH, help="rill-bench-serve")
    ap.add_argument("--llama-server", default=serve_bench.LLAMA_SERVER)
    ap.add_argument("--aiperf", default=os.path.join(ROOT, "bench/.venv-loadgen/bin/aiperf"))
    ap.add_argument("--client-cpus", default="",
                    help="CPU list (taskset -c form, e.g. 1) for the load generators; the servers "
                    "get the other CPUs. On a 2-core machine aiperf's timing_manager alone keeps "
                    "one core busy, so unpinned it measures its own contention with the server")
    ap.add_argument("--aiperf-arg", action="append", default=[],
                    help="extra aiperf profile argument (repeatable), e.g. --aiperf-arg=--workers-max=2")
    ap.add_argument("--proto-dir", default=os.path.join(ROOT, "proto"))
    ap.add_argument("--rill-port", type=int, default=50571)
    ap.add_argument("--openai-port", type=int, default=50573)
    ap.add_argument("--llama-port", type=int, default=50572)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/out/gateway_compare"))
    args = ap.parse_args()
    # SIGTERM (e.g. `timeout`) unwinds like Ctrl-C: servers stopped, partial report.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    levels = [int(c) for c in args.concurrency.split(",")]
    if args.client_cpus:
        client = set(parse_cpu_list(args.client_cpus))
        servers = os.sched_getaffinity(0) - client
        if not client <= os.sched_getaffinity(0) or not servers:
            raise SystemExit(f"error: --client-cpus={args.client_cpus} must leave the servers a "
                             f"CPU of {sorted(os.sched_getaffinity(0))}")
        os.sched_setaffinity(0, servers)  # every server started from here inherits it
        serve_bench.CLIENT_PREFIX = ["taskset", "-c", args.client_cpus]
    for path, what in ((args.aiperf, "aiperf (run bench/setup_loadgen.sh)"),
                       (args.bench_serve, "rill-bench-serve"), (args.rill, "rill"),
                       (args.llama_server if not args.skip_llama else args.rill, "llama-server")):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"error: {what} not found at {path}")
    os.makedirs(args.out_dir, exist_ok=True)
    serve_bench.RILL, serve_bench.BENCH = args.rill, args.bench_serve
    serve_bench.LLAMA_SERVER = args.llama_server
    os.environ.setdefault("RILL_VENV", os.path.join(ROOT, ".venv"))  # smg, as ./rill sets it
    datasets = Datasets(args.dataset, args.out_dir, args.output_len, args.num_requests,
                        args.warmup_requests)

    rows = []

    def add(system, client, r):
        rows.append({"system": system, "client": client, **r})
        print(f"{system} / {client} c={r['concurrency']}: {r['completed']} ok, "
              f"{r['errors']} failed, {r['output_tok_s']:.1f} tok/s, "
              f"TTFT p50 {r['ttft_p50_ms']:.1f} ms", file=sys.stderr, flush=True)

    try:
        gateway = [f"--openai_port={args.openai_port}", f"--engines={args.engines}",
                   f"--max_num_seqs={max(64, max(levels))}"]
        proc, native = serve_bench.start_rill(args, args.out_dir, gateway)
        try:
            base = f"http://127.0.0.1:{args.openai_port}"
            model = model_id(base)
            tokenizer = write_tokenizer(os.path.join(args.out_dir, "rill-run"), args.out_dir,
                                        args.proto_dir)
            for c in levels:
                # Native and gateway back to back per level, so drift hits both alike.
                add(NATIVE, BENCH_SERVE,
                    run_bench_serve(args, datasets, "rill", native, "native", c))
                add(GATEWAY, BENCH_SERVE, run_bench_serve(
                    args, datasets, "openai", f"127.0.0.1:{args.openai_port}", "gateway", c,
                    [f"--model_name={model}"]))
                add(GATEWAY, AIPERF,
                    run_aiperf(args, datasets, base, model, tokenizer, "gateway", c))
        finally:
            serve_bench.stop(proc)
        if not args.skip_llama:
            slot_ctx = 2048 + max(args.output_len, 128) + 64  # The longest prompt is ~1.3k tokens.
            proc, address = serve_bench.start_llama(args, args.out_dir, max(levels), slot_ctx)
            try:
                base = f"http://{address}"
                llama_model = model_id(base)
                for c in levels:
                    add(LLAMA, AIPERF, run_aiperf(args, datasets, base, llama_model, tokenizer,
                                                  "llama", c))
                    add(LLAMA, BENCH_SERVE,
                        run_bench_serve(args, datasets, "openai", address, "llama", c,
                                        [f"--model_name={llama_model}"]))
            finally:
                serve_bench.stop(proc)
    finally:  # A failed run still reports what it measured.
        report(args, levels, rows)


def report(args, levels, rows):
    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads per server, "
          f"{args.num_requests} requests per level, "
          f"{args.output_len or 'per-prompt (output_len)'} output tokens (ignore_eos), "
          f"prompts {os.path.relpath(args.dataset, ROOT)}; "
          + (f"clients on CPUs {args.client_cpus}, servers on the others; " if args.client_cpus else "")
          + "ITL: rill-bench-serve "
          "= every gap between tokens, aiperf = per request (e2e - TTFT) / (tokens - 1)")
    print_table(rows)
    checks = targets(rows, levels)
    with open(os.path.join(args.out_dir, "compare.json"), "w") as f:
        json.dump({"args": vars(args), "rows": rows, "targets": checks}, f, indent=1)
    print(f"\nwrote {os.path.join(args.out_dir, 'compare.json')}", file=sys.stderr)


if __name__ == "__main__":
    main()
