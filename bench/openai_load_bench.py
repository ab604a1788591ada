#!/usr/bin/env python3
"""OpenAI-API load: Rill behind the smg gateway (`rill serve --openai_port`)
vs llama-server's OpenAI endpoint, same GGUF, same prompts
(bench/serve_bench/data/prompts.jsonl), streamed /v1/completions with
ignore_eos so every request makes --output-len tokens, at each concurrency
level. One client for both: the official openai SDK (AsyncOpenAI), which
measures TTFT (first text chunk), ITL (gap between text chunks, per token)
and output tokens/s over the level's wall time. (guidellm 0.8.1 needs torch
and datasets, aiperf 0.13.0 pandas, pyarrow, scipy, transformers...: too
heavy for the project venv, so no PyPI load generator here.)

  .venv/bin/python bench/openai_load_bench.py --concurrency 1,16,64 \
      --num-requests 64 --output-len 64

Starts and stops both servers itself (bazel-bin/cli/rill; llama-server from
bench/.cache, see bench/build_llama_cpp.sh, or --llama-server).
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402  (server start/stop helpers)


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def one_request(client, model, prompt, output_len):
    t0 = time.perf_counter()
    ttft, last, itl, tokens, chunks = None, None, [], 0, 0
    stream = await client.completions.create(
        model=model, prompt=prompt, max_tokens=output_len, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    async for ev in stream:
        now = time.perf_counter()
        if ev.choices and ev.choices[0].text:
            chunks += 1
            if ttft is None:
                ttft = now - t0
            elif last is not None:
                itl.append(now - last)
            last = now
        if ev.usage:
            tokens = ev.usage.completion_tokens
    # A server that reports no usage streams one token per chunk.
    return {"ttft": ttft, "itl": itl, "tokens": tokens or chunks,
            "latency": time.perf_counter() - t0}


async def run_level(base_url, prompts, concurrency, num_requests, output_len, timeout_s):
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    model = (await client.models.list()).data[0].id
    await one_request(client, model, prompts[0], 4)  # Warm: connections, first compile.
    queue = list(range(num_requests))
    results, failures = [], []

    async def worker():
        while queue:
            i = queue.pop()
            try:
                results.append(await one_request(client, model, prompts[i % len(prompts)], output_len))
            except Exception as e:  # Counted, not fatal: a row says how many failed.
                failures.append(repr(e)[:200])

    t0 = time.perf_counter()
    try:
        # A level past its time limit counts what finished (the row says
        # how many requests did): an overloaded server cannot stall the run.
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout_s)
    except asyncio.TimeoutError:
        failures.append("level time limit (%d s)" % timeout_s)
    wall = time.perf_counter() - t0
    await client.close()
    ttft = [r["ttft"] * 1000 for r in results if r["ttft"] is not None]
    itl = [x * 1000 for r in results for x in r["itl"]]
    tokens = sum(r["tokens"] for r in results)
    return {"concurrency": concurrency, "requests": len(results), "failed": len(failures),
            "errors": failures[:3], "output_tok_s": tokens / wall, "req_s": len(results) / wall,
            "ttft_p50_ms": percentile(ttft, 50), "ttft_p90_ms": percentile(ttft, 90),
            "itl_p50_ms": percentile(itl, 50), "itl_p90_ms": percentile(itl, 90),
            "tokens_per_request": sorted({r["tokens"] for r in results})}


def start_rill_gateway(args):
    run_dir = os.path.join(args.out_dir, "rill-run")
    ready = os.path.join(args.out_dir, "rill.ready")
    if os.path.exists(ready):
        os.remove(ready)
    cmd = [args.rill, "serve", f"--port={args.rill_port}", f"--threads={args.threads}",
           f"--model={args.model}", f"--openai_port={args.openai_port}", f"--ready_file={ready}",
           "--log_to_files", f"--run_dir={run_dir}", f"--engines={args.engines}",
           f"--max_num_seqs={max(64, max(args.levels))}"]
    log = open(os.path.join(args.out_dir, "rill-serve.log"), "w")
    env = dict(os.environ)
    env.setdefault("RILL_VENV", os.path.join(serve_bench.ROOT, ".venv"))  # smg, as ./rill sets it
    proc = serve_bench.subprocess.Popen(cmd, stdout=log, stderr=serve_bench.subprocess.STDOUT,
                                        start_new_session=True, env=env)
    serve_bench.wait_until(lambda: os.path.exists(ready) or proc.poll() is not None, 600,
                           "rill serve")
    if proc.poll() is not None:
        raise SystemExit(f"error: rill serve exited with {proc.returncode}; see {log.name}")
    return proc, f"http://127.0.0.1:{args.openai_port}/v1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=serve_bench.default_model())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engines", type=int, default=1)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--num-requests", type=int, default=0, help="per level; 0 = max(8, 2 x concurrency)")
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--level-timeout", type=int, default=600, help="seconds per concurrency level")
    ap.add_argument("--dataset", default=os.path.join(serve_bench.ROOT, "bench/serve_bench/data/prompts.jsonl"))
    ap.add_argument("--llama-server", default=serve_bench.LLAMA_SERVER)
    ap.add_argument("--rill", default=serve_bench.RILL, help="the rill binary (its engine and "
                    "frontend binaries next to it or in bazel-bin); RILL_VENV names the venv with smg")
    ap.add_argument("--rill-port", type=int, default=50561)
    ap.add_argument("--openai-port", type=int, default=50563)
    ap.add_argument("--llama-port", type=int, default=50562)
    ap.add_argument("--out-dir", default=os.path.join(serve_bench.ROOT, "bench/out/openai_load"))
    args = ap.parse_args()
    args.levels = [int(c) for c in args.concurrency.split(",")]
    os.makedirs(args.out_dir, exist_ok=True)
    serve_bench.LLAMA_SERVER = args.llama_server
    with open(args.dataset) as f:
        prompts = [json.loads(line)["prompt"] for line in f if line.strip()]

    results = {}
    for backend in ("rill+smg", "llama-server"):
        if backend == "rill+smg":
            proc, url = start_rill_gateway(args)
        else:
            proc, address = serve_bench.start_llama(args, args.out_dir, max(args.levels), 1024)
            url = f"http://{address}/v1"
        try:
            results[backend] = []
            for c in args.levels:
                n = args.num_requests or max(8, 2 * c)
                r = asyncio.run(run_level(url, prompts, c, n, args.output_len, args.level_timeout))
                print(f"{backend:12s} c={c:3d}: {r['requests']} ok, {r['failed']} failed, "
                      f"{r['output_tok_s']:.1f} tok/s, TTFT p50 {r['ttft_p50_ms']:.0f} ms, "
                      f"ITL p50 {r['itl_p50_ms']:.1f} ms", file=sys.stderr, flush=True)
                results[backend].append(r)
        finally:
            serve_bench.stop(proc)

    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads each, "
          f"{args.output_len} output tokens per request (ignore_eos), prompts {os.path.basename(args.dataset)}")
    print("| conc | server | req ok/failed | output tok/s | TTFT p50 / p90 ms | ITL p50 / p90 ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for i, c in enumerate(args.levels):
        for backend in results:
            r = results[backend][i]
            print(f"| {c} | {backend} | {r['requests']}/{r['failed']} | {r['output_tok_s']:.1f} | "
                  f"{r['ttft_p50_ms']:.0f} / {r['ttft_p90_ms']:.0f} | "
                  f"{r['itl_p50_ms']:.1f} / {r['itl_p90_ms']:.1f} |")
        a, b = results["rill+smg"][i], results["llama-server"][i]
        print(f"| {c} | Rill+smg / llama | | {a['output_tok_s'] / b['output_tok_s']:.2f}x | | |"
              if b["output_tok_s"] else f"| {c} | ratio | | n/a | | |")
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
