#!/bin/bash
# Does the installed smg present its --client-cert-path to gRPC workers?
# Rill's gateway path (rill serve --openai_port, deploy/k8s/overlays/gateway)
# runs the engines' VllmEngine service without a credential because smg 1.13
# sends none to gRPC workers. Mutual TLS would close that gap, so rerun this
# on each new smg release: if it prints "smg presented a client certificate",
# the engines can require one (--tls_client_ca) instead.
#
# It makes a throw-away CA with openssl, starts rill-engine on 127.0.0.1 with
# --tls_cert/--tls_key/--tls_client_ca (so every caller must show a
# certificate that CA signed), checks that a direct gRPC client is refused
# without one and served with one, then points `smg launch` at the engine as
# grpcs://, grpc:// and https:// with --client-cert-path/--client-key-path/
# --ca-cert-paths and sends a chat completion through it. Last, a small TLS
# observer takes the worker's place to show what smg sends in the handshake.
#
# Usage: tools/smg_worker_mtls_probe.sh [rill-engine binary] (default:
# bazel-bin/engine/service/rill-engine). Needs the default model and the
# project venv (.venv, or $RILL_VENV). Takes about 5 minutes.
set -u
cd "$(dirname "$0")/.." || exit 1
ENGINE=$(realpath "${1:-bazel-bin/engine/service/rill-engine}")
VENV=${RILL_VENV:-$PWD/.venv}
D=$(mktemp -d /tmp/smg-mtls-probe.XXXXXX)
echo "files and logs in $D"
cd "$D" || exit 1
PIDS=()
stop_children() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done; }
trap stop_children EXIT

free_port() {
  "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# smg with the client certificate and CA, routing to worker URL $1, logging
# to $2; sets http_port and smg_pid.
start_smg() {
  http_port=$(free_port)
  "$VENV/bin/smg" launch --host 127.0.0.1 --port "$http_port" --backend vllm \
    --prometheus-host 127.0.0.1 --prometheus-port "$(free_port)" --log-level debug \
    --worker-urls "$1" --client-cert-path "$D/client.pem" --client-key-path "$D/client.key" \
    --ca-cert-paths "$D/ca.pem" >"$2" 2>&1 &
  smg_pid=$!
  PIDS+=("$smg_pid")
}
make_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -out "$1.pem" -days 2 -subj "/CN=$1" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign 2>>openssl.log
}
make_leaf() {  # name ca extensions serial
  printf '%b' "$3" >"$1.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -out "$1.csr" -subj "/CN=$1" 2>>openssl.log
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "$4" -days 2 \
    -extfile "$1.ext" -out "$1.pem" 2>>openssl.log
}
make_ca ca
make_ca rogue-ca
make_leaf server ca 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' 2
make_leaf client ca 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' 3
make_leaf rogue rogue-ca 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' 4

cat >probe.py <<'EOF'
# A grpc.health.v1 call to the engine: with the CA's client certificate,
# with none, with one from another CA, and in plaintext.
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
port = sys.argv[1]
rd = lambda f: open(f, "rb").read()
def call(name, creds):
    target = f"127.0.0.1:{port}"
    ch = grpc.secure_channel(target, creds) if creds else grpc.insecure_channel(target)
    try:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        print(f"  {name}: OK {health_pb2.HealthCheckResponse.ServingStatus.Name(r.status)}")
    except grpc.RpcError as e:
        print(f"  {name}: {e.code().name}: {e.details()[:150]}")
call("client certificate from the CA", grpc.ssl_channel_credentials(rd("ca.pem"), rd("client.key"), rd("client.pem")))
call("TLS without a client certificate", grpc.ssl_channel_credentials(rd("ca.pem")))
call("client certificate from another CA", grpc.ssl_channel_credentials(rd("ca.pem"), rd("rogue.key"), rd("rogue.pem")))
call("plaintext", None)
EOF

"$ENGINE" --host=127.0.0.1 --port=0 --port_file="$D/engine.port" --tls_cert=server.pem \
  --tls_key=server.key --tls_client_ca=ca.pem >engine.log 2>&1 &
PIDS+=("$!")
for _ in $(seq 120); do [ -s engine.port ] && break; sleep 1; done
PORT=$(cat engine.port 2>/dev/null) || { echo "rill-engine did not start; see $D/engine.log"; exit 1; }
for _ in $(seq 120); do
  "$VENV/bin/python" probe.py "$PORT" 2>/dev/null | grep -q "from the CA: OK SERVING" && break
  sleep 2
done
echo "== rill-engine on 127.0.0.1:$PORT requiring client certificates; direct gRPC callers:"
"$VENV/bin/python" probe.py "$PORT"

verdict="smg presented NO client certificate to the gRPC worker"
for scheme in grpcs grpc https; do
  start_smg "$scheme://127.0.0.1:$PORT" "smg-$scheme.log"
  sleep 40
  echo "== smg --worker-urls $scheme://127.0.0.1:$PORT --client-cert-path ... --ca-cert-paths ..."
  echo "  GET /workers: $(curl -s -m 5 "http://127.0.0.1:$http_port/workers" | head -c 300)"
  reply=$(curl -s -m 60 -w ' HTTP %{http_code}' "http://127.0.0.1:$http_port/v1/chat/completions" \
    -H 'Content-Type: application/json' \
    -d '{"model":"default","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}')
  echo "  POST /v1/chat/completions: $(echo "$reply" | head -c 300)"
  case "$reply" in *"HTTP 200") verdict="smg presented a client certificate (worker URL $scheme://)" ;; esac
  kill "$smg_pid" 2>/dev/null
  wait "$smg_pid" 2>/dev/null
  echo "  smg's log, connection errors (count):"
  sed 's/\x1b\[[0-9;]*m//g' "smg-$scheme.log" | grep -i -E "transport|tls|certif|handshake|https" |
    grep -o -E "(Step failed|error)[^=]*=?\"?[^\"]{0,160}" | sort | uniq -c | sort -rn | head -4
done
echo "== rill-engine's log, TLS handshake lines (count):"
grep -i -E "handshake|ssl" engine.log | sed 's/^[^]]*] //' | sort | uniq -c | sort -rn | head -6

# A TLS observer in the worker's place: logs every connection smg opens,
# whether it starts a TLS handshake or plaintext HTTP/2, and which client
# certificate (if any) it presents.
cat >observer.py <<'PYEOF'
import socket, ssl, sys, threading
port_file, log = sys.argv[1], open(sys.argv[2], "w", buffering=1)
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile="ca.pem")
ctx.load_cert_chain("server.pem", "server.key")
ctx.verify_mode = ssl.CERT_OPTIONAL
ctx.set_alpn_protocols(["h2"])
srv = socket.create_server(("127.0.0.1", 0))
open(port_file, "w").write(str(srv.getsockname()[1]))
def serve(conn):
    try:
        first = conn.recv(24, socket.MSG_PEEK)
        if first[:1] != b"\x16":
            log.write(f"  connection: plaintext, first bytes {first!r}\n")
            return
        tls = ctx.wrap_socket(conn, server_side=True)
        cert = tls.getpeercert()
        who = dict(x[0] for x in cert["subject"])["commonName"] if cert else None
        log.write(f"  connection: {tls.version()} alpn={tls.selected_alpn_protocol()} "
                  f"client certificate={who}\n")
        tls.close()
    except Exception as e:
        log.write(f"  connection: TLS handshake failed: {e}\n")
    finally:
        conn.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PYEOF
for scheme in grpcs grpc https; do
  rm -f observer.port
  "$VENV/bin/python" observer.py observer.port "observer-$scheme.log" &
  obs_pid=$!
  PIDS+=("$obs_pid")
  for _ in $(seq 20); do [ -s observer.port ] && break; sleep 0.5; done
  start_smg "$scheme://127.0.0.1:$(cat observer.port)" "smg-observer-$scheme.log"
  sleep 25
  kill "$smg_pid" "$obs_pid" 2>/dev/null
  wait "$smg_pid" "$obs_pid" 2>/dev/null
  echo "== a TLS observer as the worker, smg given $scheme://: the connections smg opened (count)"
  sort "observer-$scheme.log" | uniq -c
  [ -s "observer-$scheme.log" ] || echo "  none"
done
echo "== verdict: $verdict"
