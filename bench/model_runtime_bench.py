#!/usr/bin/env python3
"""Model-runtime benchmark: Rill vs llama.cpp on the same GGUF, same threads.

Measures, for both runtimes:
  * prompt processing (prefill) tokens/s for a P-token prompt (default 512),
  * generation (decode) tokens/s for G tokens at batch 1 (default 128),
  * batched decode aggregate tokens/s at batch 1, 8, 32 (all sequences
    together), and the 32/1 scaling ratio,
  * peak RSS of the benchmark process (measured here via wait4, so both
    runtimes are measured the same way).

A K-quant row follows (--skip-kquant to leave it out): the same model
re-quantized to Q4_K_M with llama.cpp's own llama-quantize (cached under
bench/.cache/models/), pp and tg at batch 1 for both runtimes on that file,
same threads, same run.

Aggregation: every number is the MEDIAN over repetitions (llama-bench's
per-repetition samples_ts; Rill is run --rill-runs times). Medians are used
rather than best-of-N so a single lucky run cannot flatter either side.

Writes bench/out/model_runtime.json and prints a table. Only the standard
library is used, so any python3 works; bench/model_runtime_bench.sh picks the
project venv.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
DEFAULT_LLAMA_BIN_DIR = os.path.join(BENCH_DIR, ".cache", "llama.cpp-build",
                                     "bin")
DEFAULT_RILL_BIN = os.path.join(REPO_ROOT, "bazel-bin", "cli", "rill")
DEFAULT_OUT = os.path.join(BENCH_DIR, "out", "model_runtime.json")
KQUANT_CACHE_DIR = os.path.join(BENCH_DIR, ".cache", "models")
KQUANT_TYPE = "Q4_K_M"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model():
  model_dir = os.environ.get("RILL_MODEL_DIR")
  if not model_dir:
    model_dir = os.path.join(os.path.expanduser("~"), ".cache", "rill",
                             "models")
  return os.path.join(model_dir, MODEL_FILE)


def default_threads():
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def cpu_model():
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown"


def cpu_busy_fraction(interval_s=1.0):
  """Fraction of all CPUs busy over interval_s (from /proc/stat), or None.

  Sampled before benchmarking because the 1-minute load average lags by
  minutes and so cannot tell whether another job is running right now.
  """

  def snapshot():
    with open("/proc/stat") as f:
      fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields), idle

  try:
    total0, idle0 = snapshot()
    time.sleep(interval_s)
    total1, idle1 = snapshot()
  except (OSError, ValueError, IndexError):
    return None
  if total1 == total0:
    return None
  return 1.0 - (idle1 - idle0) / float(total1 - total0)


def median(xs):
  xs = [x for x in xs if x is not None]
  return statistics.median(xs) if xs else None


class RunResult:
  def __init__(self, returncode, stdout, stderr, max_rss_mib, wall_s):
    self.returncode = returncode
    self.stdout = stdout
    self.stderr = stderr
    self.max_rss_mib = max_rss_mib
    self.wall_s = wall_s


def run_measured(cmd):
  """Runs cmd; returns its output and the child's own peak RSS (wait4)."""
  print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr,
        flush=True)
  start = datetime.datetime.now()
  # stderr goes to a file so a chatty child can never block on a full pipe
  # while we read stdout.
  with tempfile.TemporaryFile() as err:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
    try:
      out = proc.stdout.read()
    finally:
      proc.stdout.close()
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    err_text = err.read().decode(errors="replace")
  wall_s = (datetime.datetime.now() - start).total_seconds()
  # Linux reports ru_maxrss in KiB.
  return RunResult(proc.returncode, out.decode(errors="replace"), err_text,
                   rusage.ru_maxrss / 1024.0, wall_s)


def tail(text, n=15):
  return "\n".join(text.strip().splitlines()[-n:])


# ----------------------------------------------------------------- llama.cpp


def llama_version(bin_dir):
  version_file = os.path.join(os.path.dirname(bin_dir), "VERSION")
  info = {}
  if os.path.exists(version_file):
    with open(version_file) as f:
      info["build"] = f.read().strip().splitlines()
  return info


def run_llama_bench(args):
  exe = os.path.join(args.llama_bin_dir, "llama-bench")
  cmd = [
      exe, "-m", args.model, "-t", str(args.threads), "-p",
      str(args.prompt_tokens), "-n", str(args.gen_tokens), "-r",
      str(args.reps), "-o", "json"
  ]
  res = run_measured(cmd)
  if res.returncode != 0:
    raise RuntimeError("llama-bench failed (rc=%d):\n%s" %
                       (res.returncode, tail(res.stderr)))
  records = json.loads(res.stdout)
  out = {"command": cmd, "max_rss_mib": res.max_rss_mib}
  for rec in records:
    samples = rec.get("samples_ts") or [rec["avg_ts"]]
    entry = {
        "median_tokens_per_s": median(samples),
        "avg_tokens_per_s": rec.get("avg_ts"),
        "stddev_tokens_per_s": rec.get("stddev_ts"),
        "samples_tokens_per_s": samples,
    }
    if rec.get("n_prompt", 0) > 0 and rec.get("n_gen", 0) == 0:
      out["pp"] = entry
    elif rec.get("n_gen", 0) > 0 and rec.get("n_prompt", 0) == 0:
      out["tg"] = entry
    for key in ("build_commit", "build_number", "cpu_info", "model_type",
                "n_threads", "n_batch", "n_ubatch", "flash_attn", "type_k",
                "type_v"):
      if key in rec:
        out.setdefault("info", {})[key] = rec[key]
  return out


def run_llama_batched(args, batches):
  """Aggregate decode tokens/s per parallel-sequence count (llama-batched-bench).

  Each of the B sequences gets its own --batched-prompt-tokens prompt (default
  1, matching `rill bench-model`, whose decode starts from a 1-token context),
  then all B decode G tokens together; speed_tg = B*G / decode time, the same
  definition as Rill's batched tg_tokens_per_s.
  """
  exe = os.path.join(args.llama_bin_dir, "llama-batched-bench")
  npp = args.batched_prompt_tokens
  # Rounded up to llama.cpp's 256-cell KV granularity so every sequence fits.
  ctx = (max(batches) * (npp + args.gen_tokens) + 255) // 256 * 256
  cmd = [
      exe, "-m", args.model, "-t", str(args.threads), "-c", str(ctx), "-npp",
      str(npp), "-ntg", str(args.gen_tokens), "-npl",
      ",".join(str(b) for b in batches), "--output-format", "jsonl"
  ]
  per_batch = {b: {"tg": [], "pp": []} for b in batches}
  max_rss = 0.0
  for _ in range(args.batched_reps):
    res = run_measured(cmd)
    if res.returncode != 0:
      raise RuntimeError("llama-batched-bench failed (rc=%d):\n%s" %
                         (res.returncode, tail(res.stderr)))
    max_rss = max(max_rss, res.max_rss_mib)
    for line in (res.stdout + "\n" + res.stderr).splitlines():
      line = line.strip()
      if not line.startswith("{") or '"speed_tg"' not in line:
        continue
      rec = json.loads(line)
      b = rec.get("pl")
      if b in per_batch:
        per_batch[b]["tg"].append(rec["speed_tg"])
        per_batch[b]["pp"].append(rec["speed_pp"])
  return {
      "command": cmd,
      "max_rss_mib": max_rss,
      "batches": {
          str(b): {
              "tg_tokens_per_s": median(v["tg"]),
              "pp_tokens_per_s": median(v["pp"]),
              "samples_tg_tokens_per_s": v["tg"],
          } for b, v in per_batch.items()
      },
  }


# ---------------------------------------------------------------------- Rill


def run_rill(args, batches):
  if not os.path.exists(args.rill_bin):
    return {
        "error":
            "Rill binary not found at %s (build it: bazel build //cli:rill)" %
            args.rill_bin
    }
  cmd = [
      args.rill_bin, "bench-model", "--model=" + args.model,
      "--threads=%d" % args.threads,
      "--prompt_tokens=%d" % args.prompt_tokens,
      "--gen_tokens=%d" % args.gen_tokens,
      "--batch=" + ",".join(str(b) for b in batches), "--json"
  ]
  per_batch = {b: {"pp": [], "tg": [], "rss": []} for b in batches}
  max_rss = 0.0
  for _ in range(args.rill_runs):
    res = run_measured(cmd)
    lines = [
        l.strip() for l in res.stdout.splitlines() if l.strip().startswith("{")
    ]
    if res.returncode != 0 or not lines:
      return {
          "command": cmd,
          "error": ("`rill bench-model` failed or printed no JSON (rc=%d); "
                    "the subcommand may not exist yet. stderr tail:\n%s" %
                    (res.returncode, tail(res.stderr)))
      }
    max_rss = max(max_rss, res.max_rss_mib)
    for line in lines:
      rec = json.loads(line)
      b = rec.get("batch")
      if b in per_batch:
        per_batch[b]["pp"].append(rec.get("pp_tokens_per_s"))
        per_batch[b]["tg"].append(rec.get("tg_tokens_per_s"))
        per_batch[b]["rss"].append(rec.get("rss_mib"))
  return {
      "command": cmd,
      "runs": args.rill_runs,
      "max_rss_mib": max_rss,
      "batches": {
          str(b): {
              "pp_tokens_per_s": median(v["pp"]),
              "tg_tokens_per_s": median(v["tg"]),
              "reported_rss_mib": median(v["rss"]),
              "samples_tg_tokens_per_s": v["tg"],
              "samples_pp_tokens_per_s": v["pp"],
          } for b, v in per_batch.items()
      },
  }


# ------------------------------------------------------------------ K-quant


def kquant_model(args):
  """The model re-quantized to KQUANT_TYPE by llama-quantize (cached)."""
  base = os.path.splitext(os.path.basename(args.model))[0]
  for suffix in (".Q4_1", ".Q4_0", ".Q8_0", ".F16", ".F32"):
    if base.endswith(suffix):
      base = base[:-len(suffix)]
  out = os.path.join(KQUANT_CACHE_DIR, "%s.%s.gguf" % (base, KQUANT_TYPE))
  if os.path.exists(out):
    return out
  exe = args.llama_quantize or os.path.join(args.llama_bin_dir,
                                            "llama-quantize")
  if not os.path.exists(exe):
    raise RuntimeError("%s missing; run bench/build_llama_cpp.sh" % exe)
  os.makedirs(KQUANT_CACHE_DIR, exist_ok=True)
  # The default model ships as Q4_1 only: re-quantizing it is what a user
  # without the f16 checkpoint would do (llama.cpp needs the flag for it).
  cmd = [exe, "--allow-requantize", args.model, out + ".tmp", KQUANT_TYPE,
         str(args.threads)]
  res = run_measured(cmd)
  if res.returncode != 0:
    raise RuntimeError("llama-quantize failed (rc=%d):\n%s" %
                       (res.returncode, tail(res.stderr)))
  os.replace(out + ".tmp", out)
  return out


def run_kquant(args):
  """pp and tg at batch 1 for both runtimes on the K-quant file."""
  kargs = argparse.Namespace(**vars(args))
  kargs.model = kquant_model(args)
  out = {"model": kargs.model, "type": KQUANT_TYPE}
  if not args.skip_llama:
    out["llama_cpp"] = run_llama_bench(kargs)
  if not args.skip_rill:
    out["rill"] = run_rill(kargs, [1])
  return out


# --------------------------------------------------------------------- table


def ratio(a, b):
  if a is None or b is None or b == 0:
    return None
  return a / b


def fmt(x, digits=1):
  return "-" if x is None else "%.*f" % (digits, x)


def print_table(title, header, rows):
  widths = [
      max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))
  ]
  print("\n" + title)
  line = " | ".join(str(h).ljust(w) for h, w in zip(header, widths))
  print(line)
  print("-+-".join("-" * w for w in widths))
  for r in rows:
    print(" | ".join(
        str(c).ljust(w) if i == 0 else str(c).rjust(w)
        for i, (c, w) in enumerate(zip(r, widths))))


def main():
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--model", default=default_model())
  ap.add_argument("--threads", type=int, default=default_threads())
  ap.add_argument("--prompt-tokens", type=int, default=512)
  ap.add_argument("--gen-tokens", type=int, default=128)
  ap.add_argument("--batches", default="1,8,32",
                  help="batched-decode batch sizes (default 1,8,32)")
  ap.add_argument("--batched-prompt-tokens", type=int, default=1,
                  help="per-sequence prompt before batched decode in "
                  "llama-batched-bench (default 1 = Rill's bench-model)")
  ap.add_argument("--reps", type=int, default=5,
                  help="llama-bench repetitions (-r), default 5")
  ap.add_argument("--rill-runs", type=int, default=3,
                  help="Rill invocations; median taken (default 3)")
  ap.add_argument("--batched-reps", type=int, default=1,
                  help="llama-batched-bench invocations (default 1)")
  ap.add_argument("--llama-bin-dir", default=DEFAULT_LLAMA_BIN_DIR)
  ap.add_argument("--rill-bin", default=DEFAULT_RILL_BIN)
  ap.add_argument("--skip-rill", action="store_true")
  ap.add_argument("--skip-llama", action="store_true")
  ap.add_argument("--skip-llama-batched", action="store_true",
                  help="skip llama-batched-bench (the slowest part)")
  ap.add_argument("--skip-kquant", action="store_true",
                  help="skip the %s row (the model re-quantized by "
                  "llama-quantize)" % KQUANT_TYPE)
  ap.add_argument("--llama-quantize", default=None,
                  help="llama-quantize binary (default: in --llama-bin-dir)")
  ap.add_argument("--out", default=DEFAULT_OUT)
  args = ap.parse_args()

  batches = sorted({int(b) for b in args.batches.split(",") if b})
  if 1 not in batches:
    batches = [1] + batches
  if not os.path.exists(args.model):
    sys.exit("error: model not found: %s (set RILL_MODEL_DIR or --model)" %
             args.model)

  load_before = os.getloadavg()
  busy_before = cpu_busy_fraction()
  if busy_before is not None and busy_before > 0.10:
    print("warning: CPUs are %.0f%% busy before starting; other work on this "
          "machine will depress both runtimes' numbers unevenly (they do not "
          "run at the same time)." % (100 * busy_before), file=sys.stderr)

  result = {
      "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
      "host": {
          "cpu": cpu_model(),
          "nproc": os.cpu_count(),
          "kernel": platform.release(),
          "loadavg_before": list(load_before),
          "cpu_busy_fraction_before": busy_before,
      },
      "model": os.path.abspath(args.model),
      "threads": args.threads,
      "prompt_tokens": args.prompt_tokens,
      "gen_tokens": args.gen_tokens,
      "batched_prompt_tokens": args.batched_prompt_tokens,
      "aggregation": "median over repetitions",
      "llama_cpp": None,
      "rill": None,
  }

  llama = None
  if not args.skip_llama:
    exe = os.path.join(args.llama_bin_dir, "llama-bench")
    if not os.path.exists(exe):
      sys.exit("error: %s missing; run bench/build_llama_cpp.sh first" % exe)
    llama = run_llama_bench(args)
    llama["version"] = llama_version(args.llama_bin_dir)
    batched_exe = os.path.join(args.llama_bin_dir, "llama-batched-bench")
    if not args.skip_llama_batched:
      if os.path.exists(batched_exe):
        llama["batched"] = run_llama_batched(args, batches)
      else:
        print("note: %s missing; skipping llama.cpp batched decode" %
              batched_exe, file=sys.stderr)
    result["llama_cpp"] = llama

  rill = None
  if not args.skip_rill:
    rill = run_rill(args, batches)
    if "error" in rill:
      print("\nRILL: " + rill["error"], file=sys.stderr)
    result["rill"] = rill

  kquant = None
  if not args.skip_kquant:
    kquant = run_kquant(args)
    result["kquant"] = kquant

  def rill_batch(b, key):
    if not rill or "error" in rill:
      return None
    return rill["batches"].get(str(b), {}).get(key)

  def llama_batch(b):
    if not llama or "batched" not in llama:
      return None
    return llama["batched"]["batches"].get(str(b), {}).get("tg_tokens_per_s")

  l_pp = llama["pp"]["median_tokens_per_s"] if llama and "pp" in llama else None
  l_tg = llama["tg"]["median_tokens_per_s"] if llama and "tg" in llama else None
  l_rss = llama["max_rss_mib"] if llama else None
  r_pp = rill_batch(1, "pp_tokens_per_s")
  r_tg = rill_batch(1, "tg_tokens_per_s")
  r_rss = rill["max_rss_mib"] if rill and "error" not in rill else None

  rows = [
      ["pp%d tokens/s" % args.prompt_tokens, fmt(r_pp), fmt(l_pp),
       fmt(ratio(r_pp, l_pp), 2)],
      ["tg%d tokens/s (batch 1)" % args.gen_tokens, fmt(r_tg), fmt(l_tg),
       fmt(ratio(r_tg, l_tg), 2)],
      ["peak RSS MiB", fmt(r_rss), fmt(l_rss), fmt(ratio(r_rss, l_rss), 2)],
  ]
  if kquant:
    kr = kquant.get("rill") or {}
    kr_b = {} if "error" in kr else kr.get("batches", {}).get("1", {})
    kl = kquant.get("llama_cpp") or {}
    k_pp = (kr_b.get("pp_tokens_per_s"),
            kl.get("pp", {}).get("median_tokens_per_s"))
    k_tg = (kr_b.get("tg_tokens_per_s"),
            kl.get("tg", {}).get("median_tokens_per_s"))
    rows.append(["%s pp%d tokens/s" % (KQUANT_TYPE, args.prompt_tokens),
                 fmt(k_pp[0]), fmt(k_pp[1]), fmt(ratio(*k_pp), 2)])
    rows.append(["%s tg%d tokens/s (batch 1)" % (KQUANT_TYPE, args.gen_tokens),
                 fmt(k_tg[0]), fmt(k_tg[1]), fmt(ratio(*k_tg), 2)])
    if "error" in kr:
      print("\nRILL (%s): %s" % (KQUANT_TYPE, kr["error"]), file=sys.stderr)
  print_table(
      "Model runtime: %s, threads=%d (median of repetitions)" %
      (os.path.basename(args.model), args.threads),
      ["metric", "Rill", "llama.cpp", "ratio (Rill/llama.cpp)"], rows)

  l_brss = (llama["batched"]["max_rss_mib"]
            if llama and "batched" in llama else None)
  print("peak RSS = the benchmark process's own peak (wait4): Rill's "
        "bench-model holds a KV cache for the largest batch; llama-bench's is "
        "sized for one %d-token sequence (llama-batched-bench, sized for the "
        "largest batch: %s MiB)." % (args.prompt_tokens + args.gen_tokens,
                                     fmt(l_brss)))

  brows = []
  for b in batches:
    r, l = rill_batch(b, "tg_tokens_per_s"), llama_batch(b)
    brows.append(["batch %d" % b, fmt(r), fmt(l), fmt(ratio(r, l), 2)])
  top = max(batches)
  r_scale = ratio(rill_batch(top, "tg_tokens_per_s"),
                  rill_batch(1, "tg_tokens_per_s"))
  l_scale = ratio(llama_batch(top), llama_batch(1))
  brows.append(["%d/1 scaling" % top, fmt(r_scale, 2), fmt(l_scale, 2), ""])
  print_table(
      "Batched decode, aggregate tokens/s (%d-token context, %d decode "
      "steps per sequence)" % (args.batched_prompt_tokens, args.gen_tokens),
      ["batch", "Rill", "llama.cpp", "ratio (Rill/llama.cpp)"], brows)

  result["summary"] = {
      "pp_tokens_per_s": {"rill": r_pp, "llama_cpp": l_pp,
                          "ratio": ratio(r_pp, l_pp)},
      "tg_tokens_per_s": {"rill": r_tg, "llama_cpp": l_tg,
                          "ratio": ratio(r_tg, l_tg)},
      "peak_rss_mib": {"rill": r_rss, "llama_cpp": l_rss,
                       "ratio": ratio(r_rss, l_rss)},
      "batched_tg_tokens_per_s": {
          str(b): {
              "rill": rill_batch(b, "tg_tokens_per_s"),
              "llama_cpp": llama_batch(b),
              "ratio": ratio(rill_batch(b, "tg_tokens_per_s"), llama_batch(b)),
          } for b in batches
      },
      "batched_scaling_%d_over_1" % top: {"rill": r_scale, "llama_cpp": l_scale},
  }
  if kquant:
    result["summary"]["kquant"] = {
        "type": KQUANT_TYPE,
        "pp_tokens_per_s": {"rill": k_pp[0], "llama_cpp": k_pp[1],
                            "ratio": ratio(*k_pp)},
        "tg_tokens_per_s": {"rill": k_tg[0], "llama_cpp": k_tg[1],
                            "ratio": ratio(*k_tg)},
    }

  result["host"]["loadavg_after"] = list(os.getloadavg())
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
  print("\nwrote " + args.out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
