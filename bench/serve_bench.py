#!/usr/bin/env python3
"""Serving comparison: Rill vs llama-server, driven by rill-bench-serve.

Starts one server at a time on 127.0.0.1 (Rill via `rill serve`, then
llama-server with continuous batching and as many slots as the highest
concurrency), runs the same workload against each through the same C++
client, and prints a table with Rill / llama-server ratios and the issue's
targets. Writes bench/out/serve/{rill,llama}_{main,long}.json, compare.json
and compare.png (matplotlib, installed into the venv on first use from
bench/requirements-plot.txt).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bazel-bin/bench/serve_bench/rill-bench-serve")
RILL = os.path.join(ROOT, "bazel-bin/cli/rill")
LLAMA_SERVER = os.path.join(ROOT, "bench/.cache/llama.cpp-build/bin/llama-server")


def default_model():
    d = os.environ.get("RILL_MODEL_DIR", os.path.expanduser("~/.cache/rill/models"))
    return os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf")


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise SystemExit(f"error: {what} not ready after {timeout} s")


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_rill(args, out_dir, extra_flags=()):
    ready = os.path.join(out_dir, "rill.ready")
    if os.path.exists(ready):
        os.remove(ready)
    cmd = [RILL, "serve", f"--port={args.rill_port}", f"--threads={args.threads}",
           f"--model={args.model}", f"--frontends={args.frontends}", f"--ready_file={ready}",
           "--log_to_files", f"--run_dir={out_dir}/rill-run"]
    for f in args.rill_engine_flag:
        cmd.append(f"--engine_flags={f}")
    cmd += list(extra_flags)
    log = open(os.path.join(out_dir, "rill-serve.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: os.path.exists(ready) or proc.poll() is not None, 600, "rill serve")
    if proc.poll() is not None:
        raise SystemExit(f"error: rill serve exited with {proc.returncode}; see {log.name}")
    return proc, f"127.0.0.1:{args.rill_port}"


def start_llama(args, out_dir, slots, slot_ctx):
    cmd = [LLAMA_SERVER, "-m", args.model, "-t", str(args.threads), "-tb", str(args.threads),
           "--host", "127.0.0.1", "--port", str(args.llama_port), "--parallel", str(slots),
           "-c", str(slots * slot_ctx), "--cont-batching", "-b", "2048", "-ub", "512"]
    log = open(os.path.join(out_dir, f"llama-server-{slots}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def healthy():
        if proc.poll() is not None:
            raise SystemExit(f"error: llama-server exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{args.llama_port}/health", timeout=2) as r:
                return r.status == 200
        except Exception:
            return False

    wait_until(healthy, 300, "llama-server")
    return proc, f"127.0.0.1:{args.llama_port}"


# Prepended to client commands, e.g. ["taskset", "-c", "1"] to keep the load
# generator off the servers' cores (gateway_compare.py --client-cpus).
CLIENT_PREFIX = []


def run_client(backend, address, out_json, flags):
    cmd = CLIENT_PREFIX + [BENCH, f"--backend={backend}", f"--address={address}", f"--out_json={out_json}"] + flags
    print("+ " + " ".join(cmd), file=sys.stderr)
    rc = subprocess.run(cmd).returncode
    if rc not in (0, 1) or not os.path.exists(out_json):
        raise SystemExit(f"error: rill-bench-serve failed ({rc})")
    with open(out_json) as f:
        return json.load(f)


def ratio(a, b):
    return a / b if b else float("nan")


def table(rill, llama, title):
    rows = []
    metrics = [("out tok/s", lambda l: l["output_tokens_per_s"], True),
               ("req/s", lambda l: l["request_throughput"], True),
               ("TTFT p50 ms", lambda l: l["ttft"]["p50_ms"], False),
               ("TTFT p99 ms", lambda l: l["ttft"]["p99_ms"], False),
               ("TPOT p50 ms", lambda l: l["tpot"]["p50_ms"], False),
               ("ITL p50 ms", lambda l: l["itl"]["p50_ms"], False),
               ("ITL p99 ms", lambda l: l["itl"]["p99_ms"], False),
               ("E2E p99 ms", lambda l: l["e2e"]["p99_ms"], False)]
    print(f"\n{title}")
    print(f"| conc | metric | Rill | llama-server | Rill / llama |")
    print(f"| ---: | --- | ---: | ---: | ---: |")
    for lr, ll in zip(rill["levels"], llama["levels"]):
        for name, get, _ in metrics:
            r, l = get(lr), get(ll)
            rows.append({"concurrency": lr["concurrency"], "metric": name, "rill": r, "llama": l,
                         "ratio": ratio(r, l)})
            print(f"| {lr['concurrency']} | {name} | {r:.2f} | {l:.2f} | {ratio(r, l):.2f}x |")
        if lr["errors"] or ll["errors"]:
            print(f"| {lr['concurrency']} | errors | {lr['errors']} | {ll['errors']} | |")
    return rows


def targets(rill, llama):
    by_c = {l["concurrency"]: (l, m) for l, m in zip(rill["levels"], llama["levels"])}
    checks = []
    for c in (16, 64):
        if c in by_c:
            r = ratio(by_c[c][0]["output_tokens_per_s"], by_c[c][1]["output_tokens_per_s"])
            checks.append((f"output tok/s at c={c} >= 1.5x", r, r >= 1.5))
    if 16 in by_c:
        r = ratio(by_c[16][0]["ttft"]["p99_ms"], by_c[16][1]["ttft"]["p99_ms"])
        checks.append(("p99 TTFT at c=16 <= 0.7x", r, r <= 0.7))
    if 1 in by_c:
        r = ratio(by_c[1][0]["output_tokens_per_s"], by_c[1][1]["output_tokens_per_s"])
        checks.append(("output tok/s at c=1 >= 1.0x", r, r >= 1.0))
    print("\n| target | measured | met |\n| --- | ---: | --- |")
    for name, r, ok in checks:
        print(f"| {name} | {r:.2f}x | {'yes' if ok else 'NO'} |")
    return [{"target": n, "ratio": r, "met": ok} for n, r, ok in checks]


def plot(results, path):
    try:
        import matplotlib
    except ImportError:
        req = os.path.join(ROOT, "bench/requirements-plot.txt")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", req], check=False)
        try:
            import matplotlib
        except ImportError:
            print("note: matplotlib unavailable; no plot", file=sys.stderr)
            return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for name, data, style in (("Rill", results["rill"], "o-"), ("llama-server", results["llama"], "s--")):
        conc = [l["concurrency"] for l in data["levels"]]
        axes[0].plot(conc, [l["output_tokens_per_s"] for l in data["levels"]], style, label=name)
        for pct, alpha in (("p50_ms", 1.0), ("p99_ms", 0.5)):
            axes[1].plot(conc, [l["ttft"][pct] for l in data["levels"]], style, alpha=alpha,
                         label=f"{name} {pct[:3]}")
            axes[2].plot(conc, [l["itl"][pct] for l in data["levels"]], style, alpha=alpha,
                         label=f"{name} {pct[:3]}")
    for ax, title in zip(axes, ("output tokens/s", "TTFT (ms)", "inter-token latency (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--num-requests", type=int, default=0, help="per level; 0 = max(8, 2 x concurrency)")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--dataset", default="", help="JSONL prompts instead of synthetic ones, e.g. "
                    "bench/serve_bench/data/prompts.jsonl")
    ap.add_argument("--long-concurrency", default="1,4", help="levels of the 2,048-token case; '' skips it")
    ap.add_argument("--frontends", type=int, default=1)
    ap.add_argument("--rill-engine-flag", action="append", default=[],
                    help="extra rill-engine flag, e.g. --kv_cache_mb=2048 (repeatable)")
    ap.add_argument("--rill-port", type=int, default=50551)
    ap.add_argument("--llama-port", type=int, default=50552)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/out/serve"))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    levels = [int(c) for c in args.concurrency.split(",")]
    long_levels = [int(c) for c in args.long_concurrency.split(",") if c]

    main_flags = [f"--concurrency={args.concurrency}", f"--output_len={args.output_len}",
                  f"--num_requests={args.num_requests}", "--seed=1"]
    main_flags += [f"--dataset={args.dataset}"] if args.dataset else [f"--input_len={args.input_len}"]
    long_flags = [f"--concurrency={args.long_concurrency}", "--input_len=2048",
                  "--shared_prefix_len=1536", "--output_len=32", "--num_requests=8", "--seed=2"]
    results = {}
    for backend in ("rill", "llama"):
        slots = max(levels + long_levels)
        slot_ctx = max(args.input_len + args.output_len, 2048 + 32, 1024) + 64
        proc, address = (start_rill(args, args.out_dir) if backend == "rill"
                         else start_llama(args, args.out_dir, slots, slot_ctx))
        name = "rill" if backend == "rill" else "llama-server"
        try:
            results[backend] = run_client(name, address, os.path.join(args.out_dir, f"{backend}_main.json"),
                                          main_flags)
            if long_levels:
                results[backend + "_long"] = run_client(
                    name, address, os.path.join(args.out_dir, f"{backend}_long.json"), long_flags)
        finally:
            stop(proc)

    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads, "
          f"workload {results['rill']['workload']}")
    rows = table(results["rill"], results["llama"], "Main workload")
    long_rows = []
    if long_levels:
        long_rows = table(results["rill_long"], results["llama_long"],
                          "Long context: 2,048-token prompts sharing a 1,536-token prefix, 32 out")
    checks = targets(results["rill"], results["llama"])
    with open(os.path.join(args.out_dir, "compare.json"), "w") as f:
        json.dump({"args": vars(args), "rows": rows, "long_rows": long_rows, "targets": checks,
                   "raw": results}, f, indent=1)
    plot(results, os.path.join(args.out_dir, "compare.png"))


if __name__ == "__main__":
    main()
