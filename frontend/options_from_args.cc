#include "frontend/options_from_args.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/secret_file.h"

namespace rill::frontend {

absl::StatusOr<FrontendOptions> MakeFrontendOptions(const FrontendArgs& args) {
  if (absl::Status s = ValidateFrontendArgs(args); !s.ok()) return s;
  FrontendOptions opts;
  opts.host = args.host;
  opts.port = args.port;
  opts.engine_address = args.engine;
  opts.frontend_id = args.frontend_id;
  opts.admin_token = args.admin_token;
  if (!args.admin_token_file.empty()) {
    absl::StatusOr<std::string> token = base::ReadOptionalSecretFile(args.admin_token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--admin_token_file: ", token.status().message()));
    }
    opts.admin_token = *token;
  }
  if (!args.engine_secret_file.empty()) {
    absl::StatusOr<std::string> secret = base::ReadSecretFile(args.engine_secret_file);
    if (!secret.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--engine_secret_file: ", secret.status().message()));
    }
    opts.engine_secret = *secret;
  }
  opts.engine_wait = absl::Seconds(args.engine_wait_s);
  opts.session.send_buffer_messages = args.client_send_buffer;
  opts.session.send_buffer_bytes = args.client_send_buffer_bytes;
  opts.session.stall_timeout = absl::Milliseconds(args.client_stall_timeout_ms);
  opts.session.max_pending_requests = args.max_pending_requests;
  opts.session.limits.max_prompt_tokens = args.max_prompt_tokens;
  opts.session.limits.max_tokens = args.max_tokens_limit;
  opts.session.limits.max_n = args.max_n;
  opts.session.limits.max_stop_strings = args.max_stop_strings;
  opts.session.limits.max_stop_total_bytes = args.max_stop_bytes;
  opts.session.limits.max_logprobs = args.max_logprobs;
  opts.session.limits.trust_request_chat_template = args.trust_request_chat_template;
  opts.server_transport.max_receive_bytes = args.max_receive_message_bytes;
  opts.server_transport.max_send_bytes = args.max_send_message_bytes;
  opts.server_transport.reuse_port = args.reuse_port;
  opts.engine_transport.max_receive_bytes = args.engine_max_message_bytes;
  opts.engine_transport.max_send_bytes = args.engine_max_message_bytes;
  for (GrpcTransportOptions* t : {&opts.server_transport, &opts.engine_transport}) {
    t->keepalive_time = absl::Milliseconds(args.keepalive_time_ms);
    t->keepalive_timeout = absl::Milliseconds(args.keepalive_timeout_ms);
  }
  opts.server_tls = {args.tls_cert, args.tls_key, args.tls_client_ca};
  opts.engine_tls = {args.engine_tls_cert, args.engine_tls_key, args.engine_tls_ca};
  opts.engine_tls_server_name = args.engine_tls_server_name;
  return opts;
}

}  // namespace rill::frontend
