#include "worker/comm/gloo_communicator.h"

#include <exception>

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/str_cat.h"

namespace rill::worker {
namespace {

void SumFloats(void* out, const void* a, const void* b, size_t n) {
  float* o = static_cast<float*>(out);
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
}

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank,
                                   int world_size)
    : context_(std::move(context)), rank_(rank), world_size_(world_size) {}

GlooCommunicator::~GlooCommunicator() = default;

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: rank ", options.rank,
                                                   " outside a world of ", options.world_size));
  }
  if (options.rendezvous_dir.empty()) {
    return absl::InvalidArgumentError("gloo: a rendezvous directory is required");
  }
  // gloo reports failures by throwing; nothing past this file sees exceptions.
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(options.rendezvous_dir);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(options.timeout);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooCommunicator>(
        new GlooCommunicator(std::move(context), options.rank, options.world_size));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo rendezvous of rank ", options.rank, " of ",
                                               options.world_size, " in ",
                                               options.rendezvous_dir, " failed: ", e.what()));
  }
}

absl::Status GlooCommunicator::AllReduceSum(float* data, int64_t count) {
  if (world_size_ == 1 || count == 0) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, static_cast<size_t>(count));
    opts.setReduceFunction(&SumFloats);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(next_tag_++);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo all-reduce on rank ", rank_, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  if (world_size_ == 1 || bytes == 0) return absl::OkStatus();
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " out of range"));
  }
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), static_cast<size_t>(bytes));
    opts.setRoot(root);
    opts.setTag(next_tag_++);
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo broadcast on rank ", rank_, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace rill::worker
