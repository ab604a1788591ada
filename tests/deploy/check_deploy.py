#!/usr/bin/env python3
"""Checks of deploy/ that need no cluster and no Docker engine.

  check_deploy.py manifests OVERLAY_DIR   render with kustomize, validate against the
                                          Kubernetes 1.37 schemas, check Rill's rules
  check_deploy.py lint DOCKERFILE         hadolint with deploy/docker/.hadolint.yaml
  check_deploy.py packages DOCKERFILE BIN...
                                          every shared library the binaries load is
                                          installed by the runtime stage's apt list
  check_deploy.py launch OVERLAY_DIR ENGINE_BIN FRONTEND_BIN WORKER_BIN MODEL
                                          start the binaries with the manifests' own
                                          args and env, probe grpc.health.v1, SIGTERM
Exit status 0 when every check passes; each failure is printed.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

VENV_BIN = os.path.dirname(sys.executable)
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
    return cond


def render(overlay):
    # Bazel's runfiles are symlinks, which kustomize will not read as a tree:
    # render the real files behind them.
    overlay = os.path.dirname(os.path.realpath(os.path.join(overlay, "kustomization.yaml")))
    kubectl = os.path.join(VENV_BIN, "kubectl")
    out = subprocess.run([kubectl, "kustomize", overlay], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"kustomize {overlay} failed:\n{out.stderr}")
    return out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d]


def pod_spec(doc):
    return doc.get("spec", {}).get("template", {}).get("spec", {})


def flag(args, name):
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def secret_file_of(spec, container, path):
    """The Secret (name, key) mounted at file `path` in `container`, or None."""
    if path is None:
        return None
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        if not path.startswith(m["mountPath"].rstrip("/") + "/"):
            continue
        secret = volumes.get(m["name"], {}).get("secret")
        if secret is None:
            return None
        rel = path[len(m["mountPath"].rstrip("/")) + 1:]
        for item in secret.get("items", []):
            if item["path"] == rel:
                return secret["secretName"], item["key"]
        return secret["secretName"], rel
    return None


def check_credentials(fe, en):
    """The engine secret and admin token reach both sides as mounted Secret files."""
    sides = {}
    for workload in (fe, en):
        spec = pod_spec(workload)
        c = spec["containers"][0]
        wname = workload["metadata"]["name"]
        args = c.get("args", [])
        check(not any(a.startswith("--admin_token=") for a in args),
              f"{wname}: --admin_token on the command line (use --admin_token_file)")
        secret = secret_file_of(spec, c, flag(args, "engine_secret_file"))
        check(secret is not None, f"{wname}: --engine_secret_file is not a mounted Secret file")
        admin = secret_file_of(spec, c, flag(args, "admin_token_file"))
        sides[wname] = (secret, admin)
    check(sides["rill-frontend"] == sides["rill-engine"],
          f"frontend and engine credentials differ: {sides}")


def multi_flag(args, name):
    """The values after `--name` up to the next flag (argparse nargs='+')."""
    if f"--{name}" not in args:
        return []
    out = []
    for a in args[args.index(f"--{name}") + 1:]:
        if a.startswith("--"):
            break
        out.append(a)
    return out


def allows_only(policy, port, names):
    """Every ingress rule of `policy` that opens `port` admits only pods named
    (app.kubernetes.io/name) in `names`."""
    opened = False
    for rule in policy["spec"].get("ingress", []):
        ports = [p.get("port") for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        opened = True
        peers = rule.get("from")
        if not peers:
            return False  # Any source.
        for peer in peers:
            labels = peer.get("podSelector", {}).get("matchLabels", {})
            if set(peer) != {"podSelector"} or labels.get("app.kubernetes.io/name") not in names:
                return False
    return opened


def check_gateway(by_kind, smg, en):
    """smg in front of the engines: discovery by the engines' labels on their
    port with the RBAC it needs, a locked control plane, and, since smg 1.13
    sends the engines no credential, a NetworkPolicy that lets only smg and
    the frontends reach the engine port."""
    if not check(smg is not None, "engines serve VllmEngine without credentials but no smg Deployment"):
        return
    spec = pod_spec(smg)
    c = spec["containers"][0]
    args = c.get("args", [])
    espec = pod_spec(en)
    eargs = espec["containers"][0]["args"]
    eport = int(flag(eargs, "port"))
    check("--service-discovery" in args, "smg: --service-discovery missing")
    selector = dict(kv.split("=", 1) for kv in multi_flag(args, "selector"))
    labels = en["spec"]["template"]["metadata"]["labels"]
    check(selector and all(labels.get(k) == v for k, v in selector.items()),
          f"smg: --selector {selector} does not match the engine pods' labels {labels}")
    check(flag(args, "service-discovery-port") == str(eport),
          f"smg: --service-discovery-port is not the engine port {eport}")
    check(flag(args, "service-discovery-namespace") is not None,
          "smg: --service-discovery-namespace missing (it would need cluster-wide RBAC)")
    # RBAC: the ServiceAccount may list and watch pods.
    sa = spec.get("serviceAccountName")
    roles = {name: r for name, r in by_kind.get("Role", {}).items()
             if any("pods" in rule.get("resources", []) and {"list", "watch"} <= set(rule.get("verbs", []))
                    for rule in r.get("rules", []))}
    bound = [b for b in by_kind.get("RoleBinding", {}).values()
             if b["roleRef"]["name"] in roles
             and any(s_["kind"] == "ServiceAccount" and s_["name"] == sa for s_ in b.get("subjects", []))]
    check(sa is not None and sa in by_kind.get("ServiceAccount", {}) and bound,
          f"smg: ServiceAccount {sa} is not bound to a Role that lists and watches pods")
    # The control plane takes a key from a Secret.
    keys = [a for a in args if a.startswith("--control-plane-api-keys")]
    env = {e["name"]: e for e in c.get("env", [])}
    key_vars = re.findall(r"\$\((\w+)\)", " ".join(keys))
    check(keys and key_vars and all("secretKeyRef" in env.get(v, {}).get("valueFrom", {}) for v in key_vars),
          "smg: --control-plane-api-keys is not taken from a Secret (its /workers would be open)")
    for e in c.get("env", []):
        if re.search(r"TOKEN|PASSWORD|SECRET|KEY", e["name"]):
            check("value" not in e, f"smg: secret {e['name']} given as a literal")
    check(spec.get("securityContext", {}).get("runAsNonRoot") is True, "smg: runAsNonRoot missing")
    sc = c.get("securityContext", {})
    check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True,
          "smg: privilege escalation / writable root")
    check("memory" in c.get("resources", {}).get("limits", {}), "smg: memory limit missing")
    http = int(flag(args, "port"))
    for probe in ("readinessProbe", "livenessProbe"):
        check(c.get(probe, {}).get("httpGet", {}).get("port") == http, f"smg: {probe} is not HTTP on {http}")
    ann = smg["spec"]["template"]["metadata"].get("annotations", {})
    mport = flag(args, "prometheus-port")
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == mport
          and any(p.get("name") == "metrics" and str(p["containerPort"]) == mport for p in c["ports"]),
          "smg: prometheus.io annotations, --prometheus-port and a 'metrics' containerPort must agree")
    svc = by_kind.get("Service", {}).get("smg")
    check(svc is not None and svc["spec"]["selector"] == smg["spec"]["selector"]["matchLabels"],
          "smg: Service missing or not selecting the smg pods")
    # Engines: grpc.health.v1 probes, liveness on the "liveness" service.
    main = espec["containers"][0]
    live = main.get("livenessProbe", {}).get("grpc", {})
    check(live.get("port") == eport and live.get("service") == "liveness",
          "engine: livenessProbe is not grpc.health.v1 'liveness' on the engine port")
    check(en["spec"]["replicas"] >= 2, "engine: fewer than 2 replicas behind the gateway")
    if "--vllm_api_without_credentials" in eargs:
        check("--vllm_api_network_restricted" in eargs,
              "engine: --vllm_api_without_credentials off loopback needs --vllm_api_network_restricted")
        guards = [p for p in by_kind.get("NetworkPolicy", {}).values()
                  if p["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name") == "rill-engine"
                  and "Ingress" in p["spec"].get("policyTypes", [])]
        check(guards and all(allows_only(p, eport, {"smg", "rill-frontend"}) for p in guards),
              f"engine: no NetworkPolicy limits port {eport} to the smg and rill-frontend pods")


def cmd_manifests(overlay):
    text, docs = render(overlay)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    v = subprocess.run([os.path.join(VENV_BIN, "kubernetes-validate"), "--strict",
                        "--kubernetes-version", "1.37", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    check(v.returncode == 0, f"schema validation failed:\n{v.stdout}{v.stderr}")
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    fe = by_kind.get("Deployment", {}).get("rill-frontend")
    en = by_kind.get("StatefulSet", {}).get("rill-engine")
    if not check(fe is not None and en is not None, "frontend Deployment or engine StatefulSet missing"):
        return
    check(fe["spec"]["replicas"] >= 2, "frontend replicas < 2")
    hpa = by_kind.get("HorizontalPodAutoscaler", {}).get("rill-frontend")
    check(hpa is not None and hpa["spec"]["scaleTargetRef"]["name"] == "rill-frontend"
          and hpa["spec"]["minReplicas"] >= 2
          and any(m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]),
          "HPA on frontend CPU with minReplicas >= 2 missing")
    pdb_targets = {p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
                   for p in by_kind.get("PodDisruptionBudget", {}).values()}
    check({"rill-frontend", "rill-engine"} <= pdb_targets, f"PDBs cover {pdb_targets}")
    for name, svc in by_kind.get("Service", {}).items():
        want = "http" if name == "smg" else "grpc"  # The gateway serves the OpenAI API.
        for p in svc["spec"]["ports"]:
            check(p.get("appProtocol") == want, f"service {name} port {p.get('name')} lacks appProtocol {want}")
    check(by_kind["Service"]["rill-engine"]["spec"].get("clusterIP") == "None", "engine service not headless")
    for workload in (fe, en):
        spec = pod_spec(workload)
        wname = workload["metadata"]["name"]
        check(spec.get("securityContext", {}).get("runAsNonRoot") is True, f"{wname}: runAsNonRoot missing")
        check(spec.get("terminationGracePeriodSeconds", 30) >= 30, f"{wname}: grace period < 30 s")
        for c in spec.get("initContainers", []) + spec["containers"]:
            cname = f"{wname}/{c['name']}"
            res = c.get("resources", {})
            check("cpu" in res.get("requests", {}) and "memory" in res.get("requests", {}),
                  f"{cname}: cpu/memory requests missing")
            check("memory" in res.get("limits", {}), f"{cname}: memory limit missing")
            sc = c.get("securityContext", {})
            check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True,
                  f"{cname}: privilege escalation / writable root")
            for e in c.get("env", []):
                if re.search(r"TOKEN|PASSWORD|SECRET|KEY", e["name"]):
                    check("value" not in e, f"{cname}: secret {e['name']} given as a literal")
        main = spec["containers"][0]
        port = main["ports"][0]["containerPort"]
        for probe in ("startupProbe", "readinessProbe"):
            p = main.get(probe, {})
            check(p.get("grpc", {}).get("port") == port, f"{wname}: {probe} is not grpc on {port}")
        check("livenessProbe" in main, f"{wname}: livenessProbe missing")
        # Prometheus scrapes the port the process serves /metrics on.
        ann = workload["spec"]["template"]["metadata"].get("annotations", {})
        mport = flag(main.get("args", []), "metrics_port")
        check(ann.get("prometheus.io/scrape") == "true" and mport is not None
              and ann.get("prometheus.io/port") == mport
              and any(p.get("name") == "metrics" and str(p["containerPort"]) == mport
                      for p in main["ports"]),
              f"{wname}: prometheus.io annotations, --metrics_port ({mport}) and a 'metrics' "
              f"containerPort must agree")
    check("preStop" in pod_spec(fe)["containers"][0].get("lifecycle", {}), "frontend preStop missing")
    espec = pod_spec(en)
    check(any(v["name"] == "dshm" and v.get("emptyDir", {}).get("medium") == "Memory"
              for v in espec["volumes"]), "engine: /dev/shm memory volume missing")
    check(any(m["mountPath"] == "/dev/shm" for m in espec["containers"][0]["volumeMounts"]),
          "engine: /dev/shm not mounted")
    check(len(espec.get("initContainers", [])) == 1, "engine: model-fetch init container missing")
    eargs = espec["containers"][0]["args"]
    tp = int(flag(eargs, "tensor_parallel_size") or 1)
    ext = flag(eargs, "external_workers_dir")
    workers = [c for c in espec["containers"][1:] if "rill-worker" in " ".join(c.get("command", []))]
    def gpus_of(c):
        return int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
    if ext:
        # One worker container per rank, ranks 0..tp-1, all on the engine's socket.
        check(len(workers) == tp, f"engine: {len(workers)} worker containers for tensor_parallel_size={tp}")
        ranks = sorted(int(flag(c["args"], "rank") or -1) for c in workers)
        check(ranks == list(range(tp)), f"engine: worker ranks {ranks}, want 0..{tp - 1}")
        for c in workers:
            check(flag(c["args"], "control_socket") == f"{ext}/control.sock",
                  f"{c['name']}: --control_socket is not {ext}/control.sock")
            check(any(m["mountPath"] == ext for m in c["volumeMounts"]), f"{c['name']}: {ext} not mounted")
            check(any(m["mountPath"] == "/dev/shm" for m in c["volumeMounts"]), f"{c['name']}: /dev/shm not mounted")
        check(any(m["mountPath"] == ext for m in espec["containers"][0]["volumeMounts"]),
              f"engine: {ext} not mounted")
        gpus = sum(gpus_of(c) for c in workers)
        check(gpus in (0, tp), f"engine pod: {gpus} GPUs over the workers but tensor_parallel_size={tp}")
        check(all(gpus_of(c) in (0, 1) for c in workers), "a worker container holds more than one GPU")
        check(gpus_of(espec["containers"][0]) == 0, "engine container holds GPUs; the workers should")
        # The workers take their backend from the engine, whose container has
        # no GPU ("auto" would pick the CPU there): GPU workers need cuda.
        backend = flag(eargs, "backend") or "auto"
        check((backend == "cuda") == (gpus > 0),
              f"engine: --backend={backend} with {gpus} GPUs over the worker containers")
        if gpus:
            util = float(flag(eargs, "gpu_memory_utilization") or 0.9)
            check(0.0 < util <= 1.0, f"engine: --gpu_memory_utilization={util} outside (0, 1]")
            for c in workers:
                env = {e["name"]: e.get("value") for e in c.get("env", [])}
                check("NCCL_SOCKET_IFNAME" in env, f"{c['name']}: NCCL_SOCKET_IFNAME not set")
    else:
        check(not workers, "worker containers without --external_workers_dir on the engine")
        gpus = espec["containers"][0]["resources"].get("limits", {}).get("nvidia.com/gpu")
        backend = flag(eargs, "backend") or "auto"
        check(backend in ("cpu", "cuda", "auto"), f"engine: unknown --backend={backend}")
        if gpus is not None:
            check(int(gpus) == tp, f"engine: {gpus} GPUs but tensor_parallel_size={tp}")
            check(backend in ("cuda", "auto"), f"engine holds {gpus} GPU(s) but runs --backend={backend}")
        if backend == "cuda":
            # One GPU per rank: in the engine's process, or in the rill-worker
            # processes it spawns in its container (tensor_parallel_size > 1).
            check(gpus is not None and int(gpus) == tp,
                  f"engine: --backend=cuda without one GPU per rank (tensor_parallel_size={tp})")
            util = float(flag(eargs, "gpu_memory_utilization") or 0.9)
            check(0.0 < util <= 1.0, f"engine: --gpu_memory_utilization={util} outside (0, 1]")
    check(by_kind.get("Secret") is None, "a Secret is baked into the manifests")
    check_credentials(fe, en)
    smg = by_kind.get("Deployment", {}).get("smg")
    if smg is not None or "--vllm_api_without_credentials" in eargs:
        check_gateway(by_kind, smg, en)
    fe_engine = flag(pod_spec(fe)["containers"][0]["args"], "engine")
    check(fe_engine is not None and fe_engine.endswith(f":{flag(eargs, 'port')}"),
          f"frontend --engine={fe_engine} does not match the engine port")


def cmd_lint(dockerfile):
    cfg = os.path.join(os.path.dirname(dockerfile), ".hadolint.yaml")
    r = subprocess.run([os.path.join(VENV_BIN, "hadolint"), "--no-color", "--config", cfg, dockerfile],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"hadolint:\n{r.stdout}{r.stderr}")
    text = open(dockerfile).read()
    for target in ("frontend", "engine", "engine-gpu", "model-fetch", "smg"):
        check(re.search(rf"^FROM .* AS {target}$", text, re.M), f"target {target} missing")
    check(not re.search(r"^(ENV|ARG) .*(TOKEN|PASSWORD|SECRET)", text, re.M), "secret in Dockerfile")
    users = re.findall(r"^USER (\S+)", text, re.M)
    check(users and users[-1] != "0" and users[-1] != "root", "final stage runs as root")


def runtime_packages(dockerfile):
    text = open(dockerfile).read()
    stage = text.split("AS runtime", 1)[1].split("\nFROM ", 1)[0]
    install = stage.split("install -y -q --no-install-recommends", 1)[1].split("&&", 1)[0]
    return set(install.replace("\\", " ").split())


def closure(pkgs):
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                          "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(pkgs),
                         capture_output=True, text=True).stdout
    deps = set(pkgs)
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(("Depends:", "PreDepends:")):
            deps.add(line.split(":", 1)[1].strip().strip("<>").split(":")[0])
        elif line and not line.startswith("|") and ":" not in line:
            deps.add(line.strip("<>"))
    return deps


def cmd_packages(dockerfile, binaries):
    listed = runtime_packages(dockerfile)
    provided = closure(listed)
    required = set(subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Priority}\n"],
                                  capture_output=True, text=True).stdout.split("\n"))
    essential = {l.split()[0] for l in required if l.endswith(" required") or l.endswith(" important")}
    for b in binaries:
        ldd = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        for line in ldd.splitlines():
            m = re.search(r"=> (\S+)", line)
            if not m or not m.group(1).startswith("/"):
                continue
            lib = os.path.realpath(m.group(1))
            if lib.startswith("/usr/local/cuda"):
                continue  # The GPU stage copies CUDA's libraries (checked below).
            owner = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
            if owner.returncode != 0:
                owner = subprocess.run(["dpkg", "-S", m.group(1)], capture_output=True, text=True)
            if not check(owner.returncode == 0, f"{b}: {lib} belongs to no Debian package"):
                continue
            pkg = owner.stdout.split(":")[0]
            check(pkg in provided or pkg in essential,
                  f"{os.path.basename(b)} needs {lib} from {pkg}, which the runtime stage does not install")
    text = open(dockerfile).read()
    for lib in ("libcudart.so", "libcublas.so", "libcublasLt.so", "libnccl.so"):
        check(lib in text, f"GPU stage does not copy {lib}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port, timeout, service=""):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service),
                                                         timeout=2)
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    return "SERVING"
        except grpc.RpcError as e:
            last = e.code().name
        time.sleep(0.5)
    return last


def cmd_launch(overlay, engine_bin, frontend_bin, worker_bin, model):
    _, docs = render(overlay)
    pods = {d["metadata"]["name"]: pod_spec(d) for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    ec = pods["rill-engine"]["containers"][0]
    fc = pods["rill-frontend"]["containers"][0]
    eport, fport = free_port(), free_port()
    model_dir = os.path.dirname(model)

    run_dir = tempfile.mkdtemp(prefix="rill-run-")  # Stands in for the shared /run/rill volume.

    metrics_ports = {}  # gRPC port -> the /metrics port given instead of the manifest's

    def scrape(port, family):
        """/metrics of the process on gRPC `port` names `family`."""
        if port not in metrics_ports:
            return
        import urllib.request
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_ports[port]}/metrics", timeout=10) as r:
                text = r.read().decode()
        except OSError as e:
            text = str(e)
        check(f"# TYPE {family} " in text, f"/metrics on port {metrics_ports[port]} lacks {family}: {text[:200]}")

    def localize(args, port, extra_env):
        out = []
        for a in args:
            a = a.replace("/opt/rill/bin/rill-worker", worker_bin).replace("/models/", model_dir + "/")
            a = a.replace("/run/rill", run_dir)
            a = a.replace("/etc/rill/", run_dir + "/etc/")
            a = re.sub(r"\$\((\w+)\)", lambda m: extra_env.get(m.group(1), ""), a)
            if a.startswith("--port="):
                a = f"--port={port}"
            if a.startswith("--metrics_port="):
                metrics_ports[port] = free_port()
                a = f"--metrics_port={metrics_ports[port]}"
            if a.startswith("--host="):
                a = "--host=127.0.0.1"
            if a.startswith("--engine="):  # The headless Service's DNS name, here.
                a = f"--engine=127.0.0.1:{eport}"
            if a.startswith("--threads="):
                a = "--threads=2"
            if a == "--backend=cuda":  # auto: CUDA where this machine has a GPU, else the CPU
                a = "--backend=auto"
            out.append(a)
        return out

    def env_of(c):
        env = dict(os.environ)
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"].replace("/models", model_dir)
            else:
                env[e["name"]] = "test-token"  # Stands in for the Secret.
        return env

    # The Secrets' files, as the kubelet would mount them.
    for pod in pods.values():
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                secret = volumes.get(m["name"], {}).get("secret")
                if secret is None or not m["mountPath"].startswith("/etc/rill/"):
                    continue
                d = run_dir + "/etc/" + m["mountPath"][len("/etc/rill/"):]
                os.makedirs(d, exist_ok=True)
                for item in secret.get("items", []):
                    with open(os.path.join(d, item["path"]), "w") as f:
                        f.write(f"test-{secret['secretName']}-{item['key']}\n")

    procs = []
    try:
        # Worker containers first, as the kubelet may start them before the engine.
        for wc in pods["rill-engine"]["containers"][1:]:
            wenv = env_of(wc)
            check(wc.get("command") == ["/opt/rill/bin/rill-worker"], f"{wc['name']}: unexpected command")
            procs.append(subprocess.Popen([worker_bin] + localize(wc["args"], 0, wenv), env=wenv))
        eenv = env_of(ec)
        procs.append(subprocess.Popen([engine_bin] + localize(ec["args"], eport, eenv), env=eenv))
        state = health(eport, 240)
        check(state == "SERVING", f"engine health {state} with the manifest's args {ec['args']}")
        live = ec.get("livenessProbe", {}).get("grpc")
        if live is not None and live.get("service"):
            state = health(eport, 10, live["service"])
            check(state == "SERVING", f"engine liveness service '{live['service']}': {state}")
        scrape(eport, "vllm:num_requests_running")
        fenv = env_of(fc)
        procs.append(subprocess.Popen([frontend_bin] + localize(fc["args"], fport, fenv), env=fenv))
        state = health(fport, 120)
        check(state == "SERVING", f"frontend health {state} with the manifest's args {fc['args']}")
        scrape(fport, "rill:frontend_active_streams")
        # Frontend, then engine, get SIGTERM; the workers end when the engine
        # closes their socket (as their containers would).
        for p in reversed(procs):
            if os.path.basename(p.args[0]) != "rill-worker":
                p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(60)
                check(rc == 0, f"{p.args[0]} exited {rc} on shutdown")
            except subprocess.TimeoutExpired:
                check(False, f"{p.args[0]} did not exit within 60 s of shutdown")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, rest = sys.argv[1], sys.argv[2:]
    {"manifests": lambda: cmd_manifests(*rest), "lint": lambda: cmd_lint(*rest),
     "packages": lambda: cmd_packages(rest[0], rest[1:]), "launch": lambda: cmd_launch(*rest)}[cmd]()
    for f in FAILURES:
        print("FAIL:", f)
    print(f"{cmd}: {len(FAILURES)} problem(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
