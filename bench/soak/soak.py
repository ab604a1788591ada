#!/usr/bin/env python3
"""Soak test: `rill serve` at saturating load with random aborts and client
disconnects for --duration seconds (default 600), then checks it is clean.

Every --sample_every seconds (10) it records the RSS of rill-engine and each
rill-frontend (from /proc), Inference.GetLoad and Admin.GetStats. After the
load stops it waits (up to --drain_timeout) and checks: zero crashed or
restarted processes, zero unfinished requests, zero used KV blocks. Prints a
table, writes bench/out/soak/soak.json, exits 1 if a check fails. Not in CI.

  bazel build //cli:rill //engine/service:rill-engine //frontend:rill-frontend
  .venv/bin/python bench/soak/soak.py --duration 600

--hostile adds the hostile clients of hostile.py (1 MB ids, never-reading
streams, abort storms with id reuse, duplicate ids) and kills a frontend with
SIGKILL every --kill_every seconds (rill serve restarts it), and checks on
top: exactly one finished response per accepted request, no violation of the
stream contract, every process's RSS after the drain within 10 % of its value
before the load (a restarted frontend against its predecessor's).
"""
import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))
import python_client  # noqa: E402  (stub generation)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402

ADMIN_TOKEN = "soak-token"
PROMPTS = [
    "The capital of France is",
    "Write a short story about a lighthouse keeper who",
    "List ten prime numbers:",
    "def fibonacci(n):",
    "Explain how rivers form, step by step.",
    "Once upon a time",
]


def children_of(pid):
    """{pid: name} of all descendants of pid, from /proc."""
    parent = {}
    names = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        parent[int(d)] = ppid
        names[int(d)] = name
    out = {}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for c, pp in parent.items():
            if pp == p and c not in out:
                out[c] = names[c]
                frontier.append(c)
    return out


def wait_idle(stub, pb, timeout):
    """Waits until the engine has no unfinished request and no used block."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            load = stub.GetLoad(pb.GetLoadRequest(), timeout=10)
            if load.num_unfinished_requests == 0 and load.kv_cache_usage == 0:
                return
        except Exception:  # grpc.RpcError while a frontend restarts
            pass
        time.sleep(1)


def roles(serve_pid):
    """{"engine" | "frontend-i": pid}: frontends by start order, so a
    restarted frontend takes its predecessor's role."""
    procs = children_of(serve_pid)
    out = {}
    fronts = sorted(p for p, n in procs.items() if n.startswith("rill-frontend"))
    for i, p in enumerate(fronts):
        out[f"frontend-{i}"] = p
    for p, n in procs.items():
        if n.startswith("rill-engine"):
            out["engine"] = p
    return out


def threads_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, key, n=1):
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n

    def snapshot(self):
        with self.lock:
            return dict(self.c)


def client_loop(stub, pb, args, deadline, counters, rng):
    """One client: streams of 1-3 requests; some aborted, some disconnected."""
    seq = 0
    while time.time() < deadline:
        outbox = queue.Queue()

        def requests():
            while True:
                item = outbox.get()
                if item is None:
                    return
                yield item

        n = rng.randint(1, 3)
        plan = {}
        for _ in range(n):
            seq += 1
            rid = f"soak-{threading.get_ident() % 100000}-{seq}"
            roll = rng.random()
            action = ("abort" if roll < args.abort_prob else
                      "disconnect" if roll < args.abort_prob + args.disconnect_prob else "finish")
            plan[rid] = [action, rng.randint(1, 8)]  # Act after this many responses.
            outbox.put(pb.GenerateRequest(start=pb.StartRequest(
                request_id=rid, text=rng.choice(PROMPTS),
                sampling=pb.SamplingParams(max_tokens=rng.randint(8, args.max_tokens),
                                           temperature=rng.choice([0.0, 0.8]), seed=rng.randint(0, 1 << 30),
                                           ignore_eos=rng.random() < 0.5))))
            counters.add("started")
            counters.add(f"planned_{action}")
        call = stub.Generate(requests(), timeout=args.request_timeout)
        done = set()
        try:
            for resp in call:
                rid = resp.request_id
                if resp.status.code != 0:
                    counters.add(f"error_code_{resp.status.code}")
                    done.add(rid)
                else:
                    for c in resp.outputs:
                        if c.finish_reason:
                            name = pb.FinishReason.Name(c.finish_reason).replace("FINISH_REASON_", "")
                            counters.add("finished_" + name.lower())
                            done.add(rid)
                    p = plan.get(rid)
                    if p is not None and rid not in done:
                        p[1] -= 1
                        if p[1] == 0 and p[0] == "abort":
                            outbox.put(pb.GenerateRequest(abort=pb.AbortRequest(request_id=rid)))
                        elif p[1] == 0 and p[0] == "disconnect":
                            counters.add("disconnected", len(plan) - len(done))
                            call.cancel()
                            break
                if len(done) == len(plan):
                    outbox.put(None)
        except Exception as e:  # grpc.RpcError; CANCELLED after our own cancel().
            code = getattr(e, "code", lambda: None)()
            if code is not None and code.name != "CANCELLED":
                counters.add(f"rpc_error_{code.name}")
                # The stream broke (e.g. its frontend was killed): its
                # unfinished requests end with it.
                counters.add("lost_with_stream", len(plan) - len(done))
        finally:
            outbox.put(None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--clients", type=int, default=24, help="Concurrent client threads.")
    ap.add_argument("--max_tokens", type=int, default=96)
    ap.add_argument("--abort_prob", type=float, default=0.15)
    ap.add_argument("--disconnect_prob", type=float, default=0.1)
    ap.add_argument("--sample_every", type=float, default=10)
    ap.add_argument("--drain_timeout", type=float, default=60)
    ap.add_argument("--request_timeout", type=float, default=300)
    ap.add_argument("--port", type=int, default=50071)
    ap.add_argument("--frontends", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--model", default="default")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rill", default=os.path.join(ROOT, "bazel-bin/cli/rill"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/out/soak"))
    ap.add_argument("--serve_flag", action="append", default=[],
                    help="Extra flag for rill serve (repeatable), e.g. --serve_flag=--engine_binary=P.")
    ap.add_argument("--hostile", action="store_true", help="Add hostile clients and kills.")
    ap.add_argument("--kill_every", type=float, default=200,
                    help="--hostile: SIGKILL a frontend this often (0: never).")
    ap.add_argument("--warmup", type=float, default=30,
                    help="Seconds of the same load before the RSS baseline is taken.")
    ap.add_argument("--rss_tolerance", type=float, default=0.10,
                    help="--hostile: allowed RSS growth after the drain (0.10: 10%%).")
    ap.add_argument("--settle", type=float, default=10,
                    help="Seconds idle before each RSS reading (baseline and after the drain).")
    ap.add_argument("--hold_s", type=float, default=45,
                    help="--hostile: how long a never-reading client holds its stream.")
    args = ap.parse_args()

    import grpc
    os.makedirs(args.out, exist_ok=True)
    m = python_client.load_stubs(os.path.join(ROOT, "proto"))
    import importlib
    pb, pbg = m["inference_pb2"], m["inference_pb2_grpc"]
    apb = importlib.import_module("rill.v1.admin_pb2")
    apbg = importlib.import_module("rill.v1.admin_pb2_grpc")

    ready = os.path.join(args.out, "ready")
    if os.path.exists(ready):
        os.remove(ready)
    log_path = os.path.join(args.out, "rill-serve.log")
    cmd = [args.rill, "serve", f"--port={args.port}", f"--frontends={args.frontends}",
           f"--threads={args.threads}", f"--model={args.model}", f"--admin_token={ADMIN_TOKEN}",
           f"--ready_file={ready}", "--log_to_files", f"--run_dir={args.out}/run"] + args.serve_flag
    log = open(log_path, "w")
    serve = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.time()
        while not os.path.exists(ready):
            if serve.poll() is not None:
                raise SystemExit(f"rill serve exited with {serve.returncode}; see {log_path}")
            if time.time() - t0 > 600:
                raise SystemExit("rill serve not ready after 600 s")
            time.sleep(0.5)
        # The ready file holds the address (the real port with --port 0).
        time.sleep(0.2)
        with open(ready) as f:
            target = f.read().strip() or f"127.0.0.1:{args.port}"
        channel = grpc.insecure_channel(target)
        stub = pbg.InferenceStub(channel)
        admin = apbg.AdminStub(channel)
        auth = [("authorization", f"Bearer {ADMIN_TOKEN}")]
        procs0 = {p: n for p, n in children_of(serve.pid).items() if n.startswith("rill-")}
        print(f"serving on {target}; processes {sorted(procs0.items())}; "
              f"{args.clients} clients for {args.duration:.0f} s", flush=True)

        # Before the load: a warm-up of the same load for --warmup seconds
        # (allocator arenas, gRPC buffers and thread stacks reach their
        # working size), drained; then the RSS every process must come back
        # to after the real load.
        warm_end = time.time() + args.warmup
        warm = [threading.Thread(target=client_loop, daemon=True,
                                 args=(stub, pb, args, warm_end, Counters(), random.Random(i)))
                for i in range(args.clients)]
        for t in warm:
            t.start()
        if args.hostile:  # started by start_all
            warm += hostile.start_all(stub, pb, warm_end, hostile.Ledger(), args.request_timeout,
                                      max(1.0, args.warmup / 2))
        for t in warm:
            t.join(args.request_timeout)
        wait_idle(stub, pb, args.drain_timeout)
        time.sleep(args.settle)
        base_pids = roles(serve.pid)
        baseline = {role: rss_mb(p) for role, p in base_pids.items()}
        base_threads = {role: threads_of(p) for role, p in base_pids.items()}
        print("RSS before the load (MB):", json.dumps({k: round(v, 1) for k, v in baseline.items()}),
              flush=True)

        counters = Counters()
        deadline = time.time() + args.duration
        rng = random.Random(args.seed)
        clients = [threading.Thread(target=client_loop, daemon=True,
                                    args=(stub, pb, args, deadline, counters, random.Random(rng.random())))
                   for _ in range(args.clients)]
        for c in clients:
            c.start()
        ledger = hostile.Ledger()
        kills = []
        if args.hostile:
            clients += hostile.start_all(stub, pb, deadline, ledger, args.request_timeout, args.hold_s)

            def killer():
                while args.kill_every > 0 and time.time() + args.kill_every < deadline:
                    time.sleep(args.kill_every)
                    fronts = sorted(p for p, n in children_of(serve.pid).items()
                                    if n.startswith("rill-frontend"))
                    if fronts:
                        os.kill(fronts[0], signal.SIGKILL)
                        kills.append(fronts[0])
                        print(f"killed frontend pid {fronts[0]} (SIGKILL)", flush=True)
            threading.Thread(target=killer, daemon=True).start()

        samples = []
        seen_pids = dict(procs0)

        def sample(phase):
            procs = {p: n for p, n in children_of(serve.pid).items() if n.startswith("rill-")}
            seen_pids.update(procs)
            row = {"t": round(time.time() - (deadline - args.duration)), "phase": phase}
            for p, n in sorted(procs.items()):
                key = "engine_mb" if n.startswith("rill-engine") else f"frontend_mb_{p}"
                row[key] = round(rss_mb(p), 1)
            try:
                load = stub.GetLoad(pb.GetLoadRequest(), timeout=10)
                row.update(unfinished=load.num_unfinished_requests, running=load.num_running_requests,
                           waiting=load.num_waiting_requests, kv_usage=round(load.kv_cache_usage, 4))
            except grpc.RpcError as e:
                row["load_error"] = e.code().name
            try:
                st = admin.GetStats(apb.GetStatsRequest(), timeout=10, metadata=auth)
                row.update(gen_tokens=st.generation_tokens_total, prompt_tokens=st.prompt_tokens_total,
                           steps=st.steps_total, preemptions=st.preemptions_total)
                if samples and "gen_tokens" in samples[-1]:
                    dt = max(1e-6, row["t"] - samples[-1]["t"])
                    row["gen_tok_s"] = round((row["gen_tokens"] - samples[-1]["gen_tokens"]) / dt, 1)
            except grpc.RpcError as e:
                row["stats_error"] = e.code().name
            samples.append(row)
            print(json.dumps(row), flush=True)
            return row

        while time.time() < deadline:
            time.sleep(min(args.sample_every, max(0.0, deadline - time.time())))
            sample("load")
        for c in clients:
            c.join(args.request_timeout)
        # Drain: cancelled streams' requests must be aborted in the engine and
        # their KV blocks freed.
        drain_start = time.time()
        final = sample("drain")
        while (final.get("unfinished", 1) != 0 or final.get("kv_usage", 1) != 0) and \
                time.time() - drain_start < args.drain_timeout:
            time.sleep(2)
            final = sample("drain")

        procs_end = {p: n for p, n in children_of(serve.pid).items() if n.startswith("rill-")}
        with open(log_path) as f:
            serve_log = f.read()
        crashes = serve_log.count("exited unexpectedly")
        restarted = sorted(set(seen_pids) - set(procs_end) - set(kills))
        checks = {
            "rill serve alive": serve.poll() is None,
            "no crashed or restarted process (beyond the kills)":
                crashes <= len(kills) and not restarted,
            "zero unfinished requests": final.get("unfinished") == 0,
            "zero used KV blocks": final.get("kv_usage") == 0,
            "no stuck client": not any(c.is_alive() for c in clients),
        }
        counts = counters.snapshot()
        accounted = sum(v for k, v in counts.items()
                        if k.startswith(("finished_", "error_code_"))
                        or k in ("disconnected", "lost_with_stream"))
        checks["every request finished, failed or was disconnected"] = accounted == counts.get("started", 0)
        # Drained: idle threads and freed buffers get --settle seconds to go.
        time.sleep(args.settle)
        after = {role: rss_mb(p) for role, p in roles(serve.pid).items()}
        print("threads before the load -> after the drain:", ", ".join(
            f"{k} {base_threads.get(k, '-')} -> {threads_of(p)}"
            for k, p in sorted(roles(serve.pid).items())))
        print("RSS before the load -> after the drain (MB):", ", ".join(
            f"{k} {baseline.get(k, float('nan')):.1f} -> {v:.1f}" for k, v in sorted(after.items())))
        if args.hostile:
            hcounts, violations = ledger.snapshot()
            print("hostile counts:", json.dumps(hcounts, sort_keys=True))
            for v in violations:
                print("  violation:", v)
            counts["hostile"] = hcounts
            checks["stream contract held (exactly one finished per request)"] = not violations
        # A process that lived through the load is held to its own value; a
        # frontend restarted after a kill to the largest frontend value
        # before the load (replicas do the same work).
        before_pid = {p: baseline[k] for k, p in base_pids.items()}
        front_max = max([v for k, v in baseline.items() if k.startswith("frontend")] or [0])
        rss_ok = True
        for k, p in roles(serve.pid).items():
            limit = before_pid.get(p, front_max if k.startswith("frontend") else 0)
            rss_ok = rss_ok and rss_mb(p) <= (1.0 + args.rss_tolerance) * limit
        if args.hostile:
            checks[f"every process's RSS back within {args.rss_tolerance:.0%} after the drain"] = rss_ok
        print("\n%-6s %-6s %10s %s %9s %8s %8s %10s %8s %9s" % (
            "t_s", "phase", "engine_MB", "frontend_MB", "unfinish", "running", "kv_use",
            "gen_tokens", "preempt", "gen_tok/s"))
        for r in samples:
            fe = "/".join(str(v) for k, v in sorted(r.items()) if k.startswith("frontend_mb_"))
            print("%-6s %-6s %10s %11s %9s %8s %8s %10s %8s %9s" % (
                r["t"], r["phase"], r.get("engine_mb", "-"), fe or "-", r.get("unfinished", "-"),
                r.get("running", "-"), r.get("kv_usage", "-"), r.get("gen_tokens", "-"),
                r.get("preemptions", "-"), r.get("gen_tok_s", "-")))
        load_rows = [r for r in samples if r["phase"] == "load" and "engine_mb" in r]
        if load_rows:
            print("\nengine RSS over the load: %.1f -> %.1f MB (first -> last sample)" % (
                load_rows[0]["engine_mb"], load_rows[-1]["engine_mb"]))
        print("client counts:", json.dumps(counts, sort_keys=True))
        print("crash lines in serve log:", crashes, "; processes gone:", restarted)
        ok = all(checks.values())
        for k, v in checks.items():
            print(f"  [{'PASS' if v else 'FAIL'}] {k}")
        with open(os.path.join(args.out, "soak.json"), "w") as f:
            json.dump({"args": vars(args), "samples": samples, "counts": counts, "checks": checks}, f, indent=1)
        print("SOAK", "PASSED" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGTERM)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
