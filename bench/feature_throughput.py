#!/usr/bin/env python3
"""Throughput with the latency features on vs off (issue 33: "no regression
from either feature"): `rill serve` plain, with n-gram speculation
(--speculative_ngram_k) and with an ITL target (--target_itl_ms), the same
synthetic workload through rill-bench-serve at each --concurrency level, one
server at a time, --rounds rounds with the configurations in rotated order.
Prints output tokens/s per run and each feature's median / plain median;
writes bench/out/feature_throughput/results.json.

  bazel build //cli:rill //bench/serve_bench:rill-bench-serve //engine/service:rill-engine \
      //frontend:rill-frontend //worker:rill-worker
  .venv/bin/python bench/feature_throughput.py --concurrency 16,64
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import ROOT, default_model, run_client, start_rill, stop  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--frontends", type=int, default=1)
    ap.add_argument("--rill_port", type=int, default=50171)
    ap.add_argument("--concurrency", default="16,64")
    ap.add_argument("--num_requests", type=int, default=0, help="per level; 0 = 2 x concurrency")
    ap.add_argument("--input_len", type=int, default=128)
    ap.add_argument("--output_len", type=int, default=128)
    ap.add_argument("--ngram_k", type=int, default=4)
    ap.add_argument("--target_itl_ms", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    out_dir = os.path.join(ROOT, "bench/out/feature_throughput")
    os.makedirs(out_dir, exist_ok=True)
    configs = {
        "plain": [],
        "ngram": [f"--speculative_ngram_k={args.ngram_k}"],
        "slo": [f"--target_itl_ms={args.target_itl_ms}"],
    }
    levels = [int(c) for c in args.concurrency.split(",")]
    runs = {name: {c: [] for c in levels} for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        # Rotate the order each round so a drift in the machine's load does
        # not favour one configuration.
        for name in names[r % len(names):] + names[:r % len(names)]:
            args.rill_engine_flag = configs[name]
            proc, address = start_rill(args, out_dir)
            try:
                for c in levels:
                    n = args.num_requests or 2 * c
                    flags = [f"--concurrency={c}", f"--num_requests={n}",
                             f"--input_len={args.input_len}", f"--output_len={args.output_len}",
                             "--progress=false"]
                    res = run_client("rill", address,
                                     os.path.join(out_dir, f"{name}_c{c}_{r}.json"), flags)
                    tps = res["levels"][0]["output_tokens_per_s"]
                    runs[name][c].append(tps)
                    print(f"round {r} {name:5s} c={c:3d}: {tps:.1f} output tok/s", flush=True)
            finally:
                stop(proc)
    print("\n| concurrency | plain tok/s | ngram tok/s | ngram / plain | slo tok/s | slo / plain |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    for c in levels:
        med = {name: statistics.median(runs[name][c]) for name in configs}
        summary[c] = med
        print(f"| {c} | {med['plain']:.1f} | {med['ngram']:.1f} | {med['ngram'] / med['plain']:.3f} "
              f"| {med['slo']:.1f} | {med['slo'] / med['plain']:.3f} |")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"args": vars(args), "runs": runs, "medians": summary}, f, indent=2)


if __name__ == "__main__":
    main()
