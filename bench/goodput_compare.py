#!/usr/bin/env python3
"""Goodput on the mixed workload: Rill with and without --target_itl_ms, and llama-server.

A Poisson stream of short chat requests with a fraction of long-document
prompts (rill-bench-serve --long_fraction), replayed by the same C++ client
against each server in turn (one at a time, same machine), with goodput = the
requests/s that met every SLO of --slo (rill-bench-serve --goodput). Prints a
markdown table and writes bench/out/goodput/{name}.json and goodput.json.
Reuses bench/serve_bench.py's server start/stop.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402  (same folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=serve_bench.default_model())
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--request-rate", type=float, default=1.0, help="Poisson arrivals, req/s")
    ap.add_argument("--concurrency", type=int, default=32, help="cap on requests in flight")
    ap.add_argument("--num-requests", type=int, default=40)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--long-fraction", type=float, default=0.1)
    ap.add_argument("--long-input-len", type=int, default=3000)
    ap.add_argument("--long-output-len", type=int, default=32)
    ap.add_argument("--slo", default="ttft_ms:2000,itl_ms:150")
    ap.add_argument("--target-itl-ms", type=int, default=100, help="Rill's --target_itl_ms")
    ap.add_argument("--target-ttft-ms", type=int, default=0, help="Rill's --target_ttft_ms")
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--frontends", type=int, default=1)
    ap.add_argument("--rill-engine-flag", action="append", default=[])
    ap.add_argument("--rill-port", type=int, default=50561)
    ap.add_argument("--llama-port", type=int, default=50562)
    ap.add_argument("--out-dir", default=os.path.join(serve_bench.ROOT, "bench/out/goodput"))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    client = [f"--concurrency={args.concurrency}", f"--request_rate={args.request_rate}",
              f"--num_requests={args.num_requests}", f"--input_len={args.input_len}",
              f"--output_len={args.output_len}", f"--long_fraction={args.long_fraction}",
              f"--long_input_len={args.long_input_len}",
              f"--long_output_len={args.long_output_len}", f"--goodput={args.slo}", "--seed=3",
              "--progress=false"]
    targets = [f"--target_itl_ms={args.target_itl_ms}"]
    if args.target_ttft_ms:
        targets.append(f"--target_ttft_ms={args.target_ttft_ms}")
    runs = [("rill", "rill", ()), ("rill+slo", "rill", tuple(targets))]
    if not args.skip_llama:
        runs.append(("llama-server", "llama", ()))
    results = {}
    for name, kind, extra in runs:
        if kind == "rill":
            proc, address = serve_bench.start_rill(args, args.out_dir, extra)
        else:
            slot_ctx = max(args.long_input_len + args.long_output_len,
                           args.input_len + args.output_len) + 64
            proc, address = serve_bench.start_llama(args, args.out_dir, args.concurrency, slot_ctx)
        try:
            results[name] = serve_bench.run_client(
                "rill" if kind == "rill" else "llama-server", address,
                os.path.join(args.out_dir, f"{name}.json"), client)
        finally:
            serve_bench.stop(proc)

    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads; "
          f"workload {results['rill']['workload']}; Poisson {args.request_rate} req/s, "
          f"{args.num_requests} requests, at most {args.concurrency} in flight; "
          f"SLO {args.slo}; rill+slo = {' '.join(targets)}")
    print("| server | goodput req/s | SLO met | TTFT p50 ms | TTFT p90 ms | ITL p50 ms | "
          "ITL p90 ms | ITL p99 ms | out tok/s | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        lv = r["levels"][0]
        g = lv.get("goodput", {})
        print(f"| {name} | {g.get('goodput', 0):.3f} | {100 * g.get('attainment', 0):.0f}% | "
              f"{lv['ttft']['p50_ms']:.0f} | {lv['ttft']['p90_ms']:.0f} | {lv['itl']['p50_ms']:.1f} | "
              f"{lv['itl']['p90_ms']:.1f} | {lv['itl']['p99_ms']:.1f} | "
              f"{lv['output_tokens_per_s']:.1f} | {lv['errors']} |")
    good = {n: r["levels"][0].get("goodput", {}).get("goodput", 0) for n, r in results.items()}
    for base in ("rill", "llama-server"):
        if base in good and good[base] > 0:
            print(f"rill+slo / {base} goodput: {good['rill+slo'] / good[base]:.2f}x")
    with open(os.path.join(args.out_dir, "goodput.json"), "w") as f:
        json.dump({"args": vars(args), "raw": results}, f, indent=1)


if __name__ == "__main__":
    main()
