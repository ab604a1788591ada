// `rill serve --openai_port`: the Shepherd Model Gateway (PyPI smg, pinned in
// tools/requirements.txt and run from the project venv) in front of
// rill-engine's vllm.grpc.engine.VllmEngine service. The gateway serves the
// OpenAI API (chat completions, completions, models, ...): it renders chat
// templates, tokenizes (with the tokenizer the engine ships through
// GetTokenizer) and streams, and routes over the engines with its
// cache-aware policy. Its control plane (worker registration, /flush_cache,
// profiling) takes only the key in admin_key_file, as a Bearer token; the
// key never goes on smg's command line. Thread: one owner thread.
#ifndef RILL_CLI_OPENAI_GATEWAY_H_
#define RILL_CLI_OPENAI_GATEWAY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/child_process.h"

namespace rill::cli {

struct OpenAiGatewayOptions {
  std::string python;  // A Python with smg installed (the project venv's).
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> engine_addresses;  // host:port of each rill-engine.
  // Holds the control-plane key (`Authorization: Bearer <key>` on /workers,
  // /flush_cache, ...). Required.
  std::string admin_key_file;
  std::string policy = "cache_aware";
  std::string log_path;  // Empty: inherit stderr.
  absl::Duration start_timeout = absl::Seconds(120);
};

class OpenAiGateway {
 public:
  ~OpenAiGateway() { Stop(); }

  // Starts smg and waits until a one-token completion goes through.
  // FailedPrecondition when smg is not installed or exits at once.
  absl::Status Start(const OpenAiGatewayOptions& options);
  // OK while the gateway runs; else why it stopped.
  absl::Status Check();
  void Stop();

  // "http://host:port/v1".
  std::string url() const;

 private:
  OpenAiGatewayOptions options_;
  base::ChildProcess process_;
};

// The venv Python that runs the gateway: $RILL_VENV/bin/python, else "".
std::string VenvPython();

}  // namespace rill::cli

#endif  // RILL_CLI_OPENAI_GATEWAY_H_
