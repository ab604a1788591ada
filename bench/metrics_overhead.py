#!/usr/bin/env python3
"""The cost of Prometheus metrics: `rill serve` with --metrics_port (scraped
every --scrape_interval_s, far more often than Prometheus' usual 15 s) vs
without, same workload through rill-bench-serve, --rounds rounds of both
(order alternating) on one machine. Prints output tokens/s per run and the
on/off ratio of the medians; writes bench/out/metrics_overhead.json.

  bazel build //cli:rill //bench/serve_bench:rill-bench-serve //engine/service:rill-engine //frontend:rill-frontend
  .venv/bin/python bench/metrics_overhead.py --concurrency 16 --num_requests 64
"""
import argparse
import json
import os
import statistics
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import ROOT, default_model, run_client, start_rill, stop  # noqa: E402


def scraper(port, interval, done, counts):
    while not done.wait(interval):
        for p in (port, port + 1):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=5) as r:
                    r.read()
                counts[0] += 1
            except OSError:
                counts[1] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--frontends", type=int, default=1)
    ap.add_argument("--rill_port", type=int, default=50151)
    ap.add_argument("--metrics_port", type=int, default=50191)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--num_requests", type=int, default=64)
    ap.add_argument("--input_len", type=int, default=128)
    ap.add_argument("--output_len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scrape_interval_s", type=float, default=1.0)
    args = ap.parse_args()
    args.rill_engine_flag = []
    out_dir = os.path.join(ROOT, "bench/out/metrics_overhead")
    os.makedirs(out_dir, exist_ok=True)
    flags = [f"--concurrency={args.concurrency}", f"--num_requests={args.num_requests}",
             f"--input_len={args.input_len}", f"--output_len={args.output_len}", "--progress=false"]
    runs = {"off": [], "on": []}
    for r in range(args.rounds):
        # Alternate which goes first, so a drift in the machine's load does
        # not favour one side.
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            extra = [f"--metrics_port={args.metrics_port}"] if mode == "on" else []
            proc, address = start_rill(args, out_dir, extra)
            done, counts = threading.Event(), [0, 0]
            t = None
            if mode == "on":
                t = threading.Thread(target=scraper, args=(args.metrics_port, args.scrape_interval_s, done, counts))
                t.start()
            try:
                res = run_client("rill", address, os.path.join(out_dir, f"{mode}_{r}.json"), flags)
            finally:
                done.set()
                if t:
                    t.join()
                stop(proc)
            tps = res["levels"][0]["output_tokens_per_s"]
            runs[mode].append(tps)
            print(f"round {r} metrics {mode}: {tps:.1f} output tok/s"
                  + (f" ({counts[0]} scrapes, {counts[1]} failed)" if mode == "on" else ""), flush=True)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    summary = {"runs": runs, "median_off": off, "median_on": on, "ratio_on_off": on / off,
               "flags": flags, "scrape_interval_s": args.scrape_interval_s}
    with open(os.path.join(ROOT, "bench/out/metrics_overhead.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"median output tok/s: off {off:.1f}, on {on:.1f}, on/off = {on / off:.3f}")


if __name__ == "__main__":
    main()
