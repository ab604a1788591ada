// The frontend options' one declaration (frontend_options.h), seen from both
// ends: every flag parsed into FrontendArgs, the checks naming the flag, what
// `rill serve` passes on, and FrontendOptions made from the args.
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "frontend/frontend_args.h"
#include "frontend/frontend_flags.h"
#include "frontend/frontend_launch_flags.h"
#include "frontend/options_from_args.h"

namespace rill::frontend {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

void Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "frontend_flags_test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  absl::ParseCommandLine(argv.size(), argv.data());
}

// A valid value that differs from the default `v`, per option type.
bool OtherValue(bool v) { return !v; }
int OtherValue(int v) { return v + 7; }
int64_t OtherValue(int64_t v) { return v + 7; }
std::string OtherValue(const std::string& v) { return v + "x"; }

// Every option, given on the command line as --name=<a value other than its
// default>, arrives in its FrontendArgs field; nothing else changes.
TEST(FrontendFlagsTest, EveryOptionRoundTripsFromItsFlag) {
  absl::FlagSaver restore;
  const FrontendArgs defaults;
  std::vector<std::string> argv;
#define RILL_GIVE_OTHER_VALUE(type, name, default_value, check, help) \
  argv.push_back("--" #name "=" + absl::UnparseFlag<type>(OtherValue(defaults.name)));
  RILL_FRONTEND_OPTIONS(RILL_GIVE_OTHER_VALUE)
  RILL_FRONTEND_LAUNCH_OPTIONS(RILL_GIVE_OTHER_VALUE)
#undef RILL_GIVE_OTHER_VALUE
  EXPECT_EQ(argv.size(), 36u);  // Adding an option? It is covered; update the count.
  Parse(argv);
  const FrontendArgs args = FrontendArgsFromFlags();
  int checked = 0;
#define RILL_EXPECT_OTHER_VALUE(type, name, default_value, check, help) \
  EXPECT_EQ(args.name, OtherValue(defaults.name)) << "--" #name;      \
  ++checked;
  RILL_FRONTEND_OPTIONS(RILL_EXPECT_OTHER_VALUE)
  RILL_FRONTEND_LAUNCH_OPTIONS(RILL_EXPECT_OTHER_VALUE)
#undef RILL_EXPECT_OTHER_VALUE
  EXPECT_EQ(checked, static_cast<int>(argv.size()));
}

TEST(FrontendFlagsTest, UntouchedFlagsKeepTheDeclaredDefaults) {
  absl::FlagSaver restore;
  Parse({"--max_n=8"});
  const FrontendArgs args = FrontendArgsFromFlags();
  EXPECT_EQ(args.max_n, 8);
  EXPECT_EQ(args.port, 50051);
  EXPECT_EQ(args.engine, "127.0.0.1:50052");
  EXPECT_EQ(args.client_send_buffer_bytes, int64_t{8} << 20);
  EXPECT_TRUE(ValidateFrontendArgs(args).ok()) << ValidateFrontendArgs(args);
}

// What `rill serve` hands each frontend: the shared options the user set,
// never a launch option (rill serve sets those itself, per frontend).
TEST(FrontendFlagsTest, OnlyChangedSharedFlagsArePassedOn) {
  absl::FlagSaver restore;
  EXPECT_TRUE(FrontendFlagsChangedFromDefault().empty());
  Parse({"--max_n=8", "--keepalive_time_ms=30000", "--tls_cert=/c.pem", "--port=9",
         "--frontend_id=7"});
  const std::vector<std::string> changed = FrontendFlagsChangedFromDefault();
  EXPECT_THAT(changed, Contains("--max_n=8"));
  EXPECT_THAT(changed, Contains("--tls_cert=/c.pem"));
  EXPECT_THAT(changed, Not(Contains(HasSubstr("--keepalive_time_ms"))));  // The default.
  EXPECT_THAT(changed, Not(Contains(StartsWith("--port"))));
  EXPECT_THAT(changed, Not(Contains(StartsWith("--frontend_id"))));
  EXPECT_EQ(changed.size(), 2u);
}

TEST(FrontendFlagsTest, ChecksNameTheFlag) {
  struct Case {
    void (*set)(FrontendArgs*);
    std::string message;
  };
  const Case cases[] = {
      {[](FrontendArgs* a) { a->max_n = 0; }, "--max_n must be at least 1, got 0"},
      {[](FrontendArgs* a) { a->client_send_buffer = -1; }, "--client_send_buffer"},
      {[](FrontendArgs* a) { a->port = -2; }, "--port must be at least 0"},
      {[](FrontendArgs* a) { a->keepalive_timeout_ms = 0; }, "--keepalive_timeout_ms"},
      {[](FrontendArgs* a) { a->otlp_traces_endpoint = "grpc://x"; }, "--otlp_traces_endpoint"},
  };
  for (const Case& c : cases) {
    FrontendArgs args;
    c.set(&args);
    const absl::Status s = ValidateFrontendArgs(args);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
    EXPECT_EQ(MakeFrontendOptions(args).status(), s);
  }
}

TEST(FrontendFlagsTest, OptionsLandWhereTheServerReadsThem) {
  FrontendArgs args;
  args.engine = "10.0.0.1:7";
  args.engine_wait_s = 3;
  args.client_stall_timeout_ms = 1500;
  args.max_tokens_limit = 99;
  args.max_stop_bytes = 5;
  args.engine_max_message_bytes = 1 << 20;
  args.keepalive_time_ms = 1000;
  args.reuse_port = true;
  args.tls_client_ca = "/ca.pem";
  args.engine_tls_server_name = "engine.local";
  absl::StatusOr<FrontendOptions> opts = MakeFrontendOptions(args);
  ASSERT_TRUE(opts.ok()) << opts.status();
  EXPECT_EQ(opts->engine_address, "10.0.0.1:7");
  EXPECT_EQ(opts->engine_wait, absl::Seconds(3));
  EXPECT_EQ(opts->session.stall_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(opts->session.limits.max_tokens, 99);
  EXPECT_EQ(opts->session.limits.max_stop_total_bytes, 5);
  EXPECT_EQ(opts->engine_transport.max_receive_bytes, 1 << 20);
  EXPECT_EQ(opts->engine_transport.max_send_bytes, 1 << 20);
  EXPECT_EQ(opts->server_transport.keepalive_time, absl::Seconds(1));
  EXPECT_EQ(opts->engine_transport.keepalive_time, absl::Seconds(1));
  EXPECT_TRUE(opts->server_transport.reuse_port);
  EXPECT_FALSE(opts->engine_transport.reuse_port);
  EXPECT_EQ(opts->server_tls.ca, "/ca.pem");
  EXPECT_EQ(opts->engine_tls_server_name, "engine.local");
}

// The declared defaults are the server's own: a frontend started with no
// flags behaves as FrontendOptions{} (what the in-process tests use).
TEST(FrontendFlagsTest, DeclaredDefaultsMatchTheServersDefaults) {
  absl::StatusOr<FrontendOptions> opts = MakeFrontendOptions(FrontendArgs{});
  ASSERT_TRUE(opts.ok()) << opts.status();
  const FrontendOptions want;
  EXPECT_EQ(opts->engine_wait, want.engine_wait);
  EXPECT_EQ(opts->session.send_buffer_messages, want.session.send_buffer_messages);
  EXPECT_EQ(opts->session.send_buffer_bytes, want.session.send_buffer_bytes);
  EXPECT_EQ(opts->session.stall_timeout, want.session.stall_timeout);
  EXPECT_EQ(opts->session.max_pending_requests, want.session.max_pending_requests);
  EXPECT_EQ(opts->session.limits.max_n, want.session.limits.max_n);
  EXPECT_EQ(opts->session.limits.max_stop_strings, want.session.limits.max_stop_strings);
  EXPECT_EQ(opts->session.limits.max_stop_total_bytes, want.session.limits.max_stop_total_bytes);
  EXPECT_EQ(opts->session.limits.max_logprobs, want.session.limits.max_logprobs);
  EXPECT_EQ(opts->server_transport.max_receive_bytes, want.server_transport.max_receive_bytes);
  EXPECT_EQ(opts->server_transport.max_send_bytes, want.server_transport.max_send_bytes);
  EXPECT_EQ(opts->server_transport.keepalive_time, want.server_transport.keepalive_time);
  EXPECT_EQ(opts->server_transport.keepalive_timeout, want.server_transport.keepalive_timeout);
  EXPECT_EQ(opts->engine_transport.max_receive_bytes, want.engine_transport.max_receive_bytes);
}

}  // namespace
}  // namespace rill::frontend
