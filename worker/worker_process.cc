#include "worker/worker_process.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <thread>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "rill/internal/worker.pb.h"
#include "worker/cpu_rank.h"
#include "worker/cuda_rank.h"
#include "worker/forward_batch.h"
#include "worker/ipc/frame.h"
#include "worker/ipc/step_wire.h"
#include "worker/rank_model.h"

namespace rill::worker {
namespace {

absl::StatusOr<int> ConnectControlSocket(const std::string& path,
                                         std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // The engine may not listen yet (a worker container can start first).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
    close(fd);
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat("cannot connect to the engine at ", path, ": ",
                                                 std::strerror(errno)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status Send(int fd, const google::protobuf::Message& m, const void* payload = nullptr,
                  size_t bytes = 0) {
  return WriteFrame(fd, m.SerializeAsString(), payload, bytes);
}

void SetStatus(const absl::Status& s, rill::internal::WorkerReply* reply) {
  reply->set_code(static_cast<int32_t>(s.code()));
  reply->set_message(std::string(s.message()));
}

// The protocol loop over one rank's model (cpu_rank.h or cuda_rank.h).
class Worker {
 public:
  Worker(const WorkerProcessOptions& options, const rill::internal::WorkerConfig& config, int fd)
      : options_(options), rank_(options.rank), config_(config), fd_(fd) {}

  // Everything before serving; its status goes to the engine in WorkerReady.
  absl::Status Init() {
    if (config_.world_size() < 1 || rank_ >= config_.world_size() || config_.block_size() < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad worker configuration for rank ", rank_,
                                                     ": ", WithoutSecrets(config_)));
    }
    absl::StatusOr<std::unique_ptr<RankModel>> model;
    if (config_.backend().empty() || config_.backend() == "cpu") {
      model = CreateCpuRank(rank_, config_);
    } else if (config_.backend() == "cuda") {
      model = CreateCudaRank(rank_, config_, options_.cuda_device);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": unknown backend '", config_.backend(), "'"));
    }
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
    return absl::OkStatus();
  }

  absl::Status SendReady(const absl::Status& init) {
    rill::internal::WorkerReady ready;
    ready.set_code(static_cast<int32_t>(init.code()));
    ready.set_message(std::string(init.message()));
    if (init.ok()) model_->DescribeReady(&ready);
    return Send(fd_, ready);
  }

  absl::Status Serve() {
    std::string header;
    while (true) {
      if (absl::Status s = ReadFrame(fd_, &header, nullptr); !s.ok()) {
        // The engine closed the socket: it is gone or done with us.
        LOG(INFO) << "rank " << rank_ << ": control socket closed, exiting";
        return absl::OkStatus();
      }
      rill::internal::WorkerCommand cmd;
      if (!cmd.ParseFromString(header)) return absl::DataLossError("unparsable worker command");
      rill::internal::WorkerReply reply;
      reply.set_seq(cmd.seq());
      switch (cmd.command_case()) {
        case rill::internal::WorkerCommand::kStep: {
          absl::Status s = RunStep(cmd.step(), &reply);
          // A failed collective leaves the group unusable: report and exit.
          if (s.code() == absl::StatusCode::kUnavailable) {
            SetStatus(s, &reply);
            (void)Send(fd_, reply);
            return s;
          }
          continue;  // RunStep sent the reply.
        }
        case rill::internal::WorkerCommand::kAllocateKvBlocks:
          SetStatus(model_->AllocateKvBlocks(cmd.allocate_kv_blocks()), &reply);
          FillInfo(reply.mutable_info());
          break;
        case rill::internal::WorkerCommand::kSleepLevel:
          SetStatus(model_->Sleep(cmd.sleep_level()), &reply);
          break;
        case rill::internal::WorkerCommand::kWakeUp:
          SetStatus(model_->WakeUp(), &reply);
          break;
        case rill::internal::WorkerCommand::kPing:
          break;
        case rill::internal::WorkerCommand::kGetInfo:
          FillInfo(reply.mutable_info());
          break;
        case rill::internal::WorkerCommand::kShutdown:
          (void)Send(fd_, reply);
          return absl::OkStatus();
        default:
          SetStatus(absl::InvalidArgumentError("unknown worker command"), &reply);
      }
      if (absl::Status s = Send(fd_, reply); !s.ok()) return absl::OkStatus();
    }
  }

 private:
  // The configuration for a log line or error: the NCCL id is a secret of
  // the ranks (anyone holding it can join their communicator).
  static std::string WithoutSecrets(rill::internal::WorkerConfig config) {
    if (!config.nccl_unique_id().empty()) config.set_nccl_unique_id("<redacted>");
    return config.ShortDebugString();
  }

  // Runs the forward pass and sends the reply (with logits from rank 0).
  // Returns the forward's status.
  absl::Status RunStep(const rill::internal::StepCommand& step,
                       rill::internal::WorkerReply* reply) {
    ForwardBatch batch;
    batch.sequences.reserve(step.sequences_size());
    for (const rill::internal::StepSequence& in : step.sequences()) {
      batch.sequences.push_back(SequenceFromWire(in));
    }
    model_->TakeCollectiveTime();  // Only this step's collectives count.
    out_.sampled.clear();
    absl::Status s = model_->Forward(batch, &out_);
    ++steps_;
    SetStatus(s, reply);
    reply->set_collective_seconds(absl::ToDoubleSeconds(model_->TakeCollectiveTime()));
    if (!s.ok() || rank_ != 0) {
      (void)Send(fd_, *reply);
      return s;
    }
    // Sequences sampled on the device: their token instead of a logits row.
    for (const DeviceSampledToken& t : out_.sampled) SampledToWire(t, reply->add_sampled());
    const int64_t vocab = model_->vocab_size();
    reply->set_vocab(static_cast<int32_t>(vocab));
    size_t total = 0;
    for (const std::vector<float>& rows : out_.logits) {
      reply->add_logit_rows(static_cast<int32_t>(rows.size() / vocab));
      total += rows.size();
    }
    payload_.resize(total);
    size_t at = 0;
    for (const std::vector<float>& rows : out_.logits) {
      std::memcpy(payload_.data() + at, rows.data(), rows.size() * sizeof(float));
      at += rows.size();
    }
    (void)Send(fd_, *reply, payload_.data(), payload_.size() * sizeof(float));
    return s;
  }

  void FillInfo(rill::internal::WorkerInfo* info) const {
    model_->FillInfo(info);
    info->set_rank(rank_);
    info->set_world_size(config_.world_size());
    info->set_pid(getpid());
    info->set_steps(steps_);
  }

  const WorkerProcessOptions options_;
  const int rank_;
  const rill::internal::WorkerConfig config_;
  const int fd_;
  std::unique_ptr<RankModel> model_;
  ForwardOutput out_;
  std::vector<float> payload_;
  uint64_t steps_ = 0;
};

}  // namespace

absl::Status RunWorkerProcess(const WorkerProcessOptions& options) {
  absl::StatusOr<int> fd = ConnectControlSocket(options.control_socket, options.connect_timeout);
  if (!fd.ok()) return fd.status();
  rill::internal::WorkerHello hello;
  hello.set_rank(options.rank);
  hello.set_pid(getpid());
  if (absl::Status s = Send(*fd, hello); !s.ok()) return s;
  std::string header;
  rill::internal::WorkerConfig config;
  if (absl::Status s = ReadFrame(*fd, &header, nullptr); !s.ok()) {
    close(*fd);
    return absl::UnavailableError(absl::StrCat("engine closed the socket before configuring rank ",
                                               options.rank, " (", s.message(), ")"));
  }
  if (!config.ParseFromString(header)) return absl::DataLossError("unparsable worker config");
  Worker worker(options, config, *fd);
  const absl::Status init = worker.Init();
  if (absl::Status s = worker.SendReady(init); !s.ok()) return s;
  if (!init.ok()) return init;
  LOG(INFO) << "rank " << options.rank << " of " << config.world_size() << " ready";
  absl::Status served = worker.Serve();
  close(*fd);
  return served;
}

}  // namespace rill::worker
