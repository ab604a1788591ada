#!/usr/bin/env python3
"""Where the gateway's TTFT goes at c=1 (issue 29): the same request, one at a
time, through every layer between a client and the engine, interleaved
(one request per path per round) so drift hits every path alike:

  frontend ids / text / chat   Rill's native frontend, rill.v1.Inference/Generate
                               (token ids; text: tokenize; chat: template + tokenize)
  engine native                the engine's internal API, rill.internal.Engine/Generate
                               (what the frontend calls), token ids
  engine vllm                  the engine's vllm.grpc.engine.VllmEngine/Generate
                               (what smg calls), token ids, stream = true
  smg <cfg> text / chat        smg's /v1/completions (text prompt: smg 1.13 refuses
                               token ids) and /v1/chat/completions, streamed (SSE)

  bench-serve frontend / smg  the issue's own client (rill-bench-serve, C++), one
                               process per request after one warm-up request

The Python clients (grpcio; http.client on one keep-alive connection) cost
alike; TTFT is the time from sending the request to the first response that
carries a generated token (a chat stream's role-only first chunk does not
count). Greedy, ignore_eos, --max-tokens tokens. By default the same prompt
every time (the first shipped prompt, cut to --prompt-chars), so every path
finds it in the prefix cache and what is left is the path's overhead;
--prompt-set all (round r sends shipped prompt r) --prompt-chars 0
--unique-prompts (each starts with a request number: a full prefill) is the
issue's workload.

Each --smg NAME=FLAGS starts one more smg on the same engine with the launch
flags of `rill serve --openai_port` plus FLAGS (VAR=VALUE words go to its
environment), so gateway settings are compared in one run. Each --rill
LABEL=PATH runs the whole set against that `rill` binary, one after the
other in one command (before/after builds).

Prints, per binary: TTFT p50 / p90 / mean per path; the CPU time each
process spent per request (schedstat, which load does not inflate, with the
idle rate for reference); and the differences that matter -- frontend -
engine native (the frontend's part), engine vllm - engine native (the
VllmEngine service's part), smg - engine vllm (smg's part), smg - frontend
(the issue's target: <= 2 ms at c=1) -- both as a difference of p50s and as
the median of the per-round paired differences (steadier under load).

On a shared machine use --autogroup-nice -20 (see set_autogroup_nice) and
the lock:

  flock /work/bench.lock .venv/bin/python bench/gateway_ttft_breakdown.py --autogroup-nice -20 --threads 1 --rounds 50
"""
import argparse
import http.client
import importlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gateway_compare  # noqa: E402  (model_id)
import serve_bench  # noqa: E402  (rill serve start/stop)

ROOT = serve_bench.ROOT

# What cli/openai_gateway.cc runs (smg's launcher with its admin key read
# from a file); kept in step by hand: the --smg configurations add to it.
LAUNCH = r"""
import sys
from smg.launch_router import launch_router, parse_router_args
with open(sys.argv[1]) as f:
    key = f.read().strip()
args = parse_router_args(sys.argv[2:])
args.control_plane_api_keys = [("rill-serve", "rill serve", key, "admin")]
launch_router(args)
"""


def load_stubs(proto_dir):
    from grpc_tools import protoc
    out = tempfile.mkdtemp(prefix="ttft_stubs_")
    for root, files in ((os.path.join(proto_dir, "smg"), ["common.proto", "vllm_engine.proto"]),
                        (proto_dir, ["rill/v1/inference.proto", "rill/internal/engine.proto"])):
        if protoc.main(["protoc", "-I" + root, "--python_out=" + out,
                        "--grpc_python_out=" + out] + files) != 0:
            raise SystemExit(f"error: protoc failed on {files}")
    sys.path.insert(0, out)
    names = ["vllm_engine_pb2", "vllm_engine_pb2_grpc", "rill.v1.inference_pb2",
             "rill.v1.inference_pb2_grpc", "rill.internal.engine_pb2",
             "rill.internal.engine_pb2_grpc"]
    return {n: importlib.import_module(n) for n in names}


def set_autogroup_nice(pid, nice):
    """Linux autogroups: with sched_autogroup_enabled every session (setsid)
    is one scheduling group, and `nice` only counts inside its group; each of
    Bazel's compiler spawns is a session of its own, so a niced build still
    takes an equal share per compiler from a benchmark's session. A negative
    autogroup nice gives the measured processes back the precedence the
    shared machine's protocol means them to have (None = leave it)."""
    if nice is None:
        return
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError as e:
        print(f"warning: autogroup nice of {pid}: {e}", file=sys.stderr)


def cpu_ns(pid):
    """CPU time (ns) that process `pid`'s threads have run, from schedstat:
    unlike wall time, it does not grow when other processes take the cores."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # A thread that ended meanwhile.
    except OSError:
        pass
    return total


def descendants(pid):
    """{pid: cmdline} of every process below `pid`."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    children.setdefault(ppid, []).append((int(d), f.read().replace(b"\0", b" ")))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = {}, [pid]
    while todo:
        for child, cmd in children.get(todo.pop(), []):
            out[child] = cmd.decode(errors="replace")
            todo.append(child)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Paths:
    """One callable per path: sends one request, returns its TTFT in seconds."""

    def __init__(self, args, m, run_dir, frontend, model):
        self.args, self.m, self.model, self.counter = args, m, model, 0
        inf, inf_grpc = m["rill.v1.inference_pb2"], m["rill.v1.inference_pb2_grpc"]
        eng, eng_grpc = m["rill.internal.engine_pb2"], m["rill.internal.engine_pb2_grpc"]
        self.inf, self.eng, self.vpb = inf, eng, m["vllm_engine_pb2"]
        with open(os.path.join(run_dir, "engine.port")) as f:
            engine = "127.0.0.1:" + f.read().strip()
        with open(os.path.join(run_dir, "engine.secret")) as f:
            self.secret_md = (("rill-engine-secret", f.read().strip()),)
        self.frontend = inf_grpc.InferenceStub(grpc.insecure_channel(frontend))
        engine_channel = grpc.insecure_channel(engine)
        self.engine = eng_grpc.EngineStub(engine_channel)
        self.vllm = m["vllm_engine_pb2_grpc"].VllmEngineStub(engine_channel)
        with open(args.dataset) as f:
            self.texts = [json.loads(line)["prompt"][:args.prompt_chars or None]
                          for line in f if line.strip()]
        if args.prompt_set == "first":
            self.texts = self.texts[:1]
        self.round = 0  # Every path of a round sends the round's prompt.
        self.engine_addr = engine
        self.http = {}  # smg name -> (port, connection)

    def prompt_text(self):
        self.counter += 1
        text = self.texts[self.round % len(self.texts)]
        return (f"Request {self.counter}.\n\n" if self.args.unique_prompts else "") + text

    def ids(self, text):
        return list(self.frontend.Tokenize(self.inf.TokenizeRequest(text=text), timeout=30).token_ids)

    def rid(self, tag):
        return f"ttft-{tag}-{os.getpid()}-{self.counter}-{time.monotonic_ns()}"

    # -- Rill's native frontend
    def _frontend(self, **prompt):
        sampling = self.inf.SamplingParams(max_tokens=self.args.max_tokens, temperature=0.0,
                                           ignore_eos=True)
        req = self.inf.GenerateRequest(start=self.inf.StartRequest(
            request_id=self.rid("fe"), sampling=sampling, **prompt))
        t0 = time.perf_counter()
        ttft = None
        for resp in self.frontend.Generate(iter([req]), timeout=60):
            if ttft is None and any(c.token_ids for c in resp.outputs):
                ttft = time.perf_counter() - t0
        return ttft

    def frontend_ids(self):
        ids = self.ids(self.prompt_text())
        return self._frontend(token_ids=self.inf.TokenIds(ids=ids))

    def frontend_text(self):
        return self._frontend(text=self.prompt_text())

    def frontend_chat(self):
        chat = self.inf.ChatPrompt(messages=[self.inf.ChatMessage(role="user",
                                                                   content=self.prompt_text())])
        return self._frontend(chat=chat)

    # -- the engine, directly
    def engine_native(self):
        ids = self.ids(self.prompt_text())
        sampling = self.inf.SamplingParams(max_tokens=self.args.max_tokens, temperature=0.0,
                                           ignore_eos=True)
        req = self.eng.EngineRequest(start=self.eng.EngineStart(
            request_id=self.rid("en"), prompt_token_ids=ids, sampling=sampling))
        t0 = time.perf_counter()
        ttft = None
        # The frontend keeps one stream open; a stream per request here costs
        # its setup too, which the gateway's per-request Generate call also pays.
        for resp in self.engine.Generate(iter([req]), metadata=self.secret_md, timeout=60):
            if ttft is None and any(c.token_ids for c in resp.outputs):
                ttft = time.perf_counter() - t0
        return ttft

    def engine_vllm(self):
        ids = self.ids(self.prompt_text())
        req = self.vpb.GenerateRequest(
            request_id=self.rid("vl"), tokenized=self.vpb.TokenizedInput(input_ids=ids),
            sampling_params=self.vpb.SamplingParams(max_tokens=self.args.max_tokens,
                                                    temperature=0.0, ignore_eos=True),
            stream=True)
        t0 = time.perf_counter()
        ttft = None
        for resp in self.vllm.Generate(req, timeout=60):
            if ttft is None and resp.WhichOneof("response") == "chunk" and resp.chunk.token_ids:
                ttft = time.perf_counter() - t0
        return ttft

    # -- smg, OpenAI API over HTTP/1.1 + SSE
    def _smg(self, name, path, body):
        port, conn = self.http[name]
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.http[name] = (port, conn)
        data = json.dumps(dict(body, model=self.model, max_tokens=self.args.max_tokens,
                               temperature=0, ignore_eos=True, stream=True)).encode()
        t0 = time.perf_counter()
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"error: smg {name} {path}: {resp.status} {resp.read()[:300]!r}")
        ttft = None
        while True:
            line = resp.readline()
            if not line:
                break
            if ttft is None and line.startswith(b"data: {"):
                choices = json.loads(line[6:]).get("choices") or [{}]
                c = choices[0]
                if c.get("text") or (c.get("delta") or {}).get("content"):
                    ttft = time.perf_counter() - t0
        return ttft

    # -- the client, rill-bench-serve (C++): one process per request,
    # after one unrecorded warm-up request on the same channel / server.
    def bench_serve(self, backend, address, extra=()):
        def run():
            d = os.path.join(self.args.out_dir, "bench_serve")
            os.makedirs(d, exist_ok=True)
            data, out = os.path.join(d, "prompt.jsonl"), os.path.join(d, "out.json")
            with open(data, "w") as f:
                for _ in range(2):
                    f.write(json.dumps({"prompt": self.prompt_text(),
                                        "output_len": self.args.max_tokens}) + "\n")
            cmd = [self.args.bench_serve, f"--backend={backend}", f"--address={address}",
                   f"--dataset={data}", "--num_requests=1", "--warmup_requests=1",
                   "--concurrency=1", "--progress=false", f"--out_json={out}"] + list(extra)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                level = json.load(f)["levels"][0]
            return level["ttft"]["p50_ms"] / 1e3 if level["completed"] == 1 else None
        return run

    def smg(self, name, kind):
        if kind == "text":
            return lambda: self._smg(name, "/v1/completions", {"prompt": self.prompt_text()})
        return lambda: self._smg(name, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": self.prompt_text()}]})


def start_smg(args, run_dir, engine_addr, name, flags):
    port = free_port()
    key = os.path.join(run_dir, f"smg-{name}.key")
    with open(key, "w") as f:
        f.write("bench-" + name)
    python = os.path.join(os.environ.get("RILL_VENV", os.path.join(ROOT, ".venv")), "bin/python")
    cmd = [python, "-c", LAUNCH, key, "--host", "127.0.0.1", "--port", str(port),
           "--backend", "vllm", "--policy", "cache_aware", "--prometheus-host", "127.0.0.1",
           "--prometheus-port", str(free_port()), "--log-level", "warn"]
    env = dict(os.environ)
    for word in flags.split():  # NAME=VALUE words are its environment (TOKIO_WORKER_THREADS=1).
        if re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", word):
            env.update([word.split("=", 1)])
        else:
            cmd.append(word)
    cmd += ["--worker-urls", "grpc://" + engine_addr]
    log = open(os.path.join(args.out_dir, f"smg-{name}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    set_autogroup_nice(proc.pid, args.autogroup_nice)

    def ready():
        if proc.poll() is not None:
            raise SystemExit(f"error: smg {name} exited; see {log.name}")
        try:  # Ready once a completion goes through (the tokenizer is registered).
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/v1/models")
            r = c.getresponse()
            if r.status != 200:
                return False
            model = json.loads(r.read())["data"][0]["id"]
            c.request("POST", "/v1/completions", body=json.dumps(
                {"model": model, "prompt": "ready?", "max_tokens": 1}),
                headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            return r.status == 200
        except (OSError, ValueError, KeyError, IndexError):
            return False

    serve_bench.wait_until(ready, 120, f"smg {name}")
    return proc, port


def measure(args, m, label):
    run = os.path.join(args.out_dir, label)
    os.makedirs(run, exist_ok=True)
    gateway = [f"--openai_port={args.openai_port}"]
    proc, frontend = serve_bench.start_rill(args, run, gateway)
    set_autogroup_nice(proc.pid, args.autogroup_nice)  # rill serve's session: all its children.
    smgs = []
    try:
        run_dir = os.path.join(run, "rill-run")
        model = gateway_compare.model_id(f"http://127.0.0.1:{args.openai_port}")
        client = Paths(args, m, run_dir, frontend, model)
        client.http["serve"] = (args.openai_port, None)
        for spec in args.smg:
            name, _, flags = spec.partition("=")
            sp, port = start_smg(args, run_dir, client.engine_addr, name, flags)
            smgs.append(sp)
            client.http[name] = (port, None)
        paths = {"frontend ids": client.frontend_ids, "frontend text": client.frontend_text,
                 "frontend chat": client.frontend_chat, "engine native": client.engine_native,
                 "engine vllm": client.engine_vllm}
        for name in client.http:
            for kind in ("text", "chat"):  # smg 1.13 refuses token-id prompts.
                paths[f"smg {name} {kind}"] = client.smg(name, kind)
        if os.access(args.bench_serve, os.X_OK):  # The issue's own client on both sides.
            paths["bench-serve frontend text"] = client.bench_serve("rill", frontend)
            for name, (port, _) in client.http.items():
                paths[f"bench-serve smg {name} text"] = client.bench_serve(
                    "openai", f"127.0.0.1:{port}", [f"--model_name={model}"])
        if args.paths:
            keep = args.paths.split(",")
            paths = {k: v for k, v in paths.items() if any(k.startswith(x) for x in keep)}
        procs = {"client": os.getpid()}
        for pid, cmd in descendants(proc.pid).items():
            exe = os.path.basename(cmd.split(" ")[0])
            if exe in ("rill-engine", "rill-frontend"):
                procs[exe[5:]] = pid
            elif "launch_router" in cmd or "smg" in cmd:  # setproctitle may rename it.
                procs["smg serve"] = pid
        for (name, _), sp in zip((s.partition("=")[::2] for s in args.smg), smgs):
            procs[f"smg {name}"] = sp.pid
        times = {k: [] for k in paths}
        cpu = {k: {p: 0 for p in procs} for k in paths}
        for r in range(args.warmup + args.rounds):
            client.round = r - args.warmup
            for k, fn in paths.items():
                before = {p: cpu_ns(pid) for p, pid in procs.items()}
                t = fn()
                after = {p: cpu_ns(pid) for p, pid in procs.items()}
                if t is None:
                    raise SystemExit(f"error: {k}: no token came back")
                if r >= args.warmup:
                    times[k].append(t * 1e3)
                    for p in procs:
                        cpu[k][p] += after[p] - before[p]
            time.sleep(args.gap_ms / 1e3)
        # What each process burns while nobody sends anything (timers,
        # health checks, load polling): ms of CPU per second.
        before = {p: cpu_ns(pid) for p, pid in procs.items()}
        time.sleep(args.idle_s)
        idle = {p: (cpu_ns(pid) - before[p]) / 1e6 / args.idle_s for p, pid in procs.items()}
        cpu = {k: {p: v / 1e6 / args.rounds for p, v in c.items()} for k, c in cpu.items()}
        cpu["(idle, per second)"] = idle
        return times, cpu
    finally:
        for sp in smgs:
            serve_bench.stop(sp)
        serve_bench.stop(proc)


def report(label, times, cpu, max_tokens):
    stat = {k: (statistics.median(v), percentile(v, 0.9), statistics.fmean(v))
            for k, v in times.items()}
    print(f"\n### {label}: TTFT ms ({len(next(iter(times.values())))} requests per path)\n")
    print("| path | p50 | p90 | mean |\n|---|---:|---:|---:|")
    for k, (p50, p90, mean) in stat.items():
        print(f"| {k} | {p50:.2f} | {p90:.2f} | {mean:.2f} |")
    procs = list(next(iter(cpu.values())))
    print(f"\n### {label}: CPU ms per request, by process (whole request, {max_tokens} "
          "tokens; the client's includes its own protobuf/JSON work)\n")
    print("| path | " + " | ".join(procs) + " |\n|---|" + "---:|" * len(procs))
    for k, c in cpu.items():
        print(f"| {k} | " + " | ".join(f"{c[p]:.2f}" for p in procs) + " |")
    print("\n| difference | p50 a - p50 b | median of paired (a - b) | paired p10 / p90 |\n"
          "|---|---:|---:|---:|")

    def diff(a, b, what):
        # Rounds pair the paths (same prompt, same moment): the median of the
        # per-round differences is steadier than the difference of medians.
        if a in stat and b in stat:
            d = [x - y for x, y in zip(times[a], times[b])]
            print(f"| {a} - {b} ({what}) | {stat[a][0] - stat[b][0]:+.2f} | "
                  f"{statistics.median(d):+.2f} | {percentile(d, 0.1):+.2f} / "
                  f"{percentile(d, 0.9):+.2f} |")

    diff("engine vllm", "engine native", "VllmEngine service vs the internal API")
    for kind in ("ids", "text", "chat"):
        diff(f"frontend {kind}", "engine native", "the frontend's part")
    for name in sorted({k.split()[2] for k in stat if k.startswith("bench-serve smg ")}):
        diff(f"bench-serve smg {name} text", "bench-serve frontend text",
             "the issue's gateway overhead, the issue's client")
    for name in sorted({k.split()[1] for k in stat if k.startswith("smg ")}):
        diff(f"smg {name} text", "engine vllm", "smg's part")
        for kind in ("text", "chat"):
            diff(f"smg {name} {kind}", f"frontend {kind}", "the issue's gateway overhead")
    return {k: {"p50": s[0], "p90": s[1], "mean": s[2], "cpu_ms": cpu[k], "samples": times[k]}
            for k, s in stat.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=serve_bench.default_model())
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=60, help="measured requests per path")
    ap.add_argument("--warmup", type=int, default=5, help="unrecorded rounds first")
    ap.add_argument("--max-tokens", type=int, default=2)
    ap.add_argument("--prompt-chars", type=int, default=400,
                    help="the first N characters of the first shipped prompt (0: all of it)")
    ap.add_argument("--unique-prompts", action="store_true")
    ap.add_argument("--prompt-set", choices=("first", "all"), default="first",
                    help="all: round r sends shipped prompt r (mixed lengths, as gateway_compare)")
    ap.add_argument("--gap-ms", type=float, default=20, help="pause between rounds")
    ap.add_argument("--dataset", default=os.path.join(ROOT, "bench/serve_bench/data/prompts.jsonl"))
    ap.add_argument("--rill", action="append", default=[],
                    help="LABEL=PATH of a rill binary (repeatable); default: bazel-bin's")
    ap.add_argument("--smg", action="append", default=[],
                    help="NAME=FLAGS: one more smg on the same engine with these extra flags "
                    "(words without a leading '-', VAR=VALUE, go to its environment)")
    ap.add_argument("--rill-engine-flag", action="append", default=[])
    ap.add_argument("--bench-serve", default=serve_bench.BENCH,
                    help="rill-bench-serve (its paths are left out if it is missing)")
    ap.add_argument("--proto-dir", default=os.path.join(ROOT, "proto"))
    ap.add_argument("--rill-port", type=int, default=50581)
    ap.add_argument("--openai-port", type=int, default=50583)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/out/gateway_ttft"))
    ap.add_argument("--idle-s", type=float, default=5,
                    help="seconds of idle CPU measured at the end")
    ap.add_argument("--paths", default="",
                    help="comma-separated prefixes of the paths to run (default: all)")
    ap.add_argument("--autogroup-nice", type=int, default=None,
                    help="e.g. -10: this process's and the servers' autogroup nice (root)")
    args = ap.parse_args()
    args.frontends = 1
    set_autogroup_nice(os.getpid(), args.autogroup_nice)
    os.makedirs(args.out_dir, exist_ok=True)
    os.environ.setdefault("RILL_VENV", os.path.join(ROOT, ".venv"))
    m = load_stubs(args.proto_dir)
    results = {}
    for spec in args.rill or [f"rill={serve_bench.RILL}"]:
        label, _, path = spec.partition("=")
        serve_bench.RILL = os.path.abspath(path)
        results[label] = report(label, *measure(args, m, label), args.max_tokens)
    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads, max_tokens "
          f"{args.max_tokens}, prompts: {args.prompt_set} of the shipped ones, "
          f"{args.prompt_chars or 'all'} chars"
          f"{' (unique per request)' if args.unique_prompts else ' (the same, prefix-cached)'}"
          f", autogroup nice {args.autogroup_nice}")
    with open(os.path.join(args.out_dir, "breakdown.json"), "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
