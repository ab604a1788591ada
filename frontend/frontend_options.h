// Every option a user sets on a frontend, declared once:
//   X(type, name, default, check, help)
// as engine/engine_options.h does for the engine. `name` is both the
// FrontendArgs field (frontend_args.h) and the flag (--name); `check` is a
// validator from base/option_checks.h, run by ValidateFrontendArgs; `help` is
// what --help prints. Types are spelled in full: the flags are declared at
// global scope.
//
// Two lists, because `rill serve` treats them differently:
// - RILL_FRONTEND_OPTIONS: how a frontend treats clients and requests. They
//   are flags of rill-frontend and of `rill serve` (frontend_flags.h), which
//   passes each one the user set on to every frontend it starts.
// - RILL_FRONTEND_LAUNCH_OPTIONS: where one frontend listens, its engine, its
//   credentials and ids. They are flags of rill-frontend only
//   (frontend_launch_flags.h): `rill serve` sets them for each frontend
//   itself, from its own flags where one has the same name (--host, --port,
//   --metrics_port, --admin_token, --admin_token_file, --shutdown_grace_ms,
//   --engine_tls_*, and the engine option --otlp_traces_endpoint).
#ifndef RILL_FRONTEND_FRONTEND_OPTIONS_H_
#define RILL_FRONTEND_FRONTEND_OPTIONS_H_

#include <cstdint>
#include <string>

#include "base/option_checks.h"

// clang-format off
#define RILL_FRONTEND_OPTIONS(X)                                                                    \
  X(int, engine_wait_s, 120, base::AtLeast(0), "How long to wait for the engine at start.")         \
  X(int, client_send_buffer, 1024, base::AtLeast(1),                                                \
    "Responses queued per client Generate stream before it counts as full "                         \
    "(twice this is a hard cap).")                                                                  \
  X(int64_t, client_send_buffer_bytes, 8 << 20, base::AtLeast(1),                                   \
    "Bytes of responses queued per client Generate stream before it counts as full "                \
    "(twice this is a hard cap).")                                                                  \
  X(int, client_stall_timeout_ms, 30000, base::AtLeast(1),                                          \
    "A stream whose send buffer stays full this long, or to which no response could be "            \
    "written this long, is ended RESOURCE_EXHAUSTED: its requests are aborted at the "              \
    "engine (the client was not reading).")                                                         \
  X(int, max_pending_requests, 4096, base::AtLeast(0),                                              \
    "Running requests over all streams of this frontend; more get "                                 \
    "RESOURCE_EXHAUSTED. 0: no limit.")                                                             \
  X(int64_t, max_prompt_tokens, 0, base::AtLeast(0), "Prompt token limit; 0: the model context.")   \
  X(int64_t, max_tokens_limit, 0, base::AtLeast(0),                                                 \
    "Largest sampling.max_tokens accepted; 0: no cap.")                                             \
  X(int, max_n, 64, base::AtLeast(1), "Largest sampling.n accepted.")                               \
  X(int, max_stop_strings, 64, base::AtLeast(0), "Most stop strings per request.")                  \
  X(int, max_stop_bytes, 4096, base::AtLeast(0), "Most bytes over all stop strings of a request.")  \
  X(int, max_logprobs, 20, base::AtLeast(0), "Largest logprobs / prompt_logprobs accepted.")        \
  X(bool, trust_request_chat_template, false, base::AnyValue(),                                     \
    "Render a chat template sent with a request (chat.chat_template). Off: such requests "          \
    "get INVALID_ARGUMENT (vLLM's --trust-request-chat-template): a template is a program "         \
    "the frontend runs on a client's behalf.")                                                      \
  X(int, max_receive_message_bytes, 8 << 20, base::AtLeast(1),                                      \
    "Largest client message accepted; larger ones get RESOURCE_EXHAUSTED.")                         \
  X(int, max_send_message_bytes, 64 << 20, base::AtLeast(1), "Largest message sent to a client.")   \
  X(int, engine_max_message_bytes, 256 << 20, base::AtLeast(1),                                     \
    "Largest message sent to / received from the engine.")                                          \
  X(int, keepalive_time_ms, 30000, base::AtLeast(1),                                                \
    "gRPC keepalive ping interval, to clients and to the engine.")                                  \
  X(int, keepalive_timeout_ms, 10000, base::AtLeast(1),                                             \
    "A peer that does not answer a keepalive ping this fast is dropped.")                           \
  X(std::string, tls_cert, "", base::AnyValue(),                                                    \
    "PEM certificate: serve clients over TLS (with --tls_key).")                                    \
  X(std::string, tls_key, "", base::AnyValue(), "PEM private key for --tls_cert.")                  \
  X(std::string, tls_client_ca, "", base::AnyValue(),                                               \
    "PEM CA: require client certificates it signed (mutual TLS).")

#define RILL_FRONTEND_LAUNCH_OPTIONS(X)                                                             \
  X(std::string, host, "127.0.0.1", base::AnyValue(), "Address to listen on.")                      \
  X(int, port, 50051, base::AtLeast(0), "TCP port; 0 picks a free one (see --port_file).")          \
  X(bool, reuse_port, false, base::AnyValue(),                                                      \
    "Bind with SO_REUSEPORT, so several frontends share --port (the kernel spreads "                \
    "connections over them); `rill serve --frontends=N` sets it. Off: the port must be "            \
    "free.")                                                                                        \
  X(std::string, port_file, "", base::AnyValue(),                                                   \
    "If set, the bound port is written here once the server is up.")                                \
  X(std::string, engine, "127.0.0.1:50052", base::AnyValue(), "The engine's host:port.")            \
  X(std::string, frontend_id, "0", base::AnyValue(),                                                \
    "This replica's id: prefixes server-assigned request ids, reported by GetLoad.")                \
  X(int, metrics_port, 0, base::AtLeast(0),                                                         \
    "Serve Prometheus metrics (rill:frontend_...) at http://<--host>:<port>/metrics; "              \
    "0 = off.")                                                                                     \
  X(std::string, otlp_traces_endpoint, "", base::HttpUrlOrEmpty(),                                  \
    "Export a span per request (llm_request, a child of the client's W3C traceparent) "             \
    "over OTLP/HTTP JSON to <url>/v1/traces, e.g. http://127.0.0.1:4318; empty = off.")             \
  X(std::string, admin_token, "", base::AnyValue(),                                                 \
    "Serve rill.v1.Admin, requiring `authorization: Bearer <token>`. Empty: no Admin.")             \
  X(std::string, admin_token_file, "", base::AnyValue(),                                            \
    "File holding the admin token (instead of --admin_token, which `ps` shows); no file "           \
    "at that path: no Admin.")                                                                      \
  X(std::string, engine_secret_file, "", base::AnyValue(),                                          \
    "File holding the engine's secret, sent on every engine call (rill serve writes one "           \
    "per run). Without it (or an --engine_tls_cert the engine trusts) a rill-engine refuses "       \
    "this frontend, which then exits with code 2.")                                                 \
  X(int, shutdown_grace_ms, 30000, base::AtLeast(0),                                                \
    "On SIGTERM/SIGINT: how long running requests may finish before the rest are "                  \
    "ended with finish_reason ABORT (health is NOT_SERVING and new calls are refused "              \
    "meanwhile).")                                                                                  \
  X(std::string, engine_tls_ca, "", base::AnyValue(),                                               \
    "PEM CA that signed the engine's certificate: talk TLS to the engine.")                         \
  X(std::string, engine_tls_cert, "", base::AnyValue(),                                             \
    "PEM client certificate for an engine started with --tls_client_ca (mutual TLS).")              \
  X(std::string, engine_tls_key, "", base::AnyValue(), "PEM private key for --engine_tls_cert.")    \
  X(std::string, engine_tls_server_name, "", base::AnyValue(),                                      \
    "Name the engine's certificate must carry; default the host of --engine.")
// clang-format on

#endif  // RILL_FRONTEND_FRONTEND_OPTIONS_H_
