#include "bench/serve_bench/rill_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rill::bench {

RillBackend::RillBackend(BenchClock::time_point epoch, const std::string& address, int connections)
    : Backend(epoch) {
  for (int i = 0; i < std::max(1, connections); ++i) {
    grpc::ChannelArguments args;
    // A distinct argument per channel keeps gRPC from sharing one subchannel.
    args.SetInt("rill.bench.connection", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs_.push_back(v1::Inference::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }
}

void RillBackend::Send(const BenchRequest& request, RequestRecord* record) {
  v1::Inference::Stub* stub = stubs_[next_.fetch_add(1) % stubs_.size()].get();
  v1::GenerateRequest msg;
  v1::StartRequest* start = msg.mutable_start();
  if (request.text.empty()) {
    start->mutable_token_ids()->mutable_ids()->Add(request.token_ids.begin(), request.token_ids.end());
  } else {
    start->set_text(request.text);
  }
  v1::SamplingParams* sp = start->mutable_sampling();
  sp->set_max_tokens(request.max_tokens);
  sp->set_temperature(0);
  sp->set_ignore_eos(true);
  start->set_output_mode(v1::OUTPUT_MODE_DELTA);

  grpc::ClientContext ctx;
  record->start_s = Now();
  auto stream = stub->Generate(&ctx);
  if (!stream->Write(msg)) {
    record->end_s = Now();
    grpc::Status st = stream->Finish();
    record->error = absl::StrCat("write failed: ", st.error_message());
    return;
  }
  stream->WritesDone();
  v1::GenerateResponse resp;
  bool finished = false;
  while (stream->Read(&resp)) {
    const double t = Now();
    if (resp.prompt_token_ids_size() > 0) record->prompt_tokens = resp.prompt_token_ids_size();
    if (resp.status().code() != 0) {
      record->error = absl::StrCat("status ", resp.status().code(), ": ", resp.status().message());
    }
    int n = 0;
    for (const v1::Completion& c : resp.outputs()) n += c.token_ids_size();
    if (n > 0) {
      record->chunk_times_s.push_back(t);
      record->chunk_tokens.push_back(n);
      record->output_tokens += n;
    }
    if (resp.finished()) finished = true;
  }
  grpc::Status st = stream->Finish();
  record->end_s = Now();
  if (!st.ok()) {
    record->error = absl::StrCat("rpc ", st.error_code(), ": ", st.error_message());
  } else if (record->error.empty() && !finished) {
    record->error = "stream ended without a finished response";
  }
  if (record->prompt_tokens == 0) record->prompt_tokens = static_cast<int64_t>(request.token_ids.size());
  record->ok = record->error.empty();
}

}  // namespace rill::bench
