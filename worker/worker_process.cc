#include "worker/worker_process.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <thread>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "rill/internal/worker.pb.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/timed_communicator.h"
#include "worker/ipc/frame.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"
#include "worker/models/tp_plan.h"

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

class Worker {
 public:
  Worker(int rank, const rill::internal::WorkerConfig& config, int fd)
      : rank_(rank), config_(config), fd_(fd) {}

  // Everything before serving; its status goes to the engine in WorkerReady.
  absl::Status Init() {
    if (config_.world_size() < 1 || rank_ >= config_.world_size() || config_.num_blocks() < 1 ||
        config_.block_size() < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad worker configuration for rank ", rank_,
                                                     ": ", config_.ShortDebugString()));
    }
    if (config_.world_size() > 1) {
      GlooOptions g;
      g.rank = rank_;
      g.world_size = config_.world_size();
      g.rendezvous_dir = config_.rendezvous_dir();
      g.timeout = std::chrono::seconds(std::max(1, config_.comm_timeout_s()));
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(g);
      if (!comm.ok()) return comm.status();
      comm_ = std::make_unique<TimedCommunicator>(std::move(*comm));
    } else {
      comm_ = std::make_unique<TimedCommunicator>(std::make_unique<SingleRankCommunicator>());
    }
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
        worker::loader::LoadCheckpoint(config_.model_path());
    if (!ckpt.ok()) return ckpt.status();
    checkpoint_ = std::move(*ckpt);
    absl::StatusOr<TpPartition> part =
        PartitionForRank(checkpoint_->config(), rank_, config_.world_size());
    if (!part.ok()) return part.status();
    part_ = *part;
    pool_ = std::make_unique<kernels::cpu::ThreadPool>(std::max(1, config_.threads()));
    absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::SetUpKernelPlan(config_.matmul());
    if (!plan.ok()) return plan.status();
    ModelOptions mo;
    mo.kernel_plan = *plan;
    mo.comm = comm_.get();
    absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(checkpoint_, pool_.get(), mo);
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
    return AllocateCache();
  }

  absl::Status SendReady(const absl::Status& init) {
    rill::internal::WorkerReady ready;
    ready.set_code(static_cast<int32_t>(init.code()));
    ready.set_message(std::string(init.message()));
    if (init.ok()) {
      ready.set_num_kv_heads(part_.num_kv_heads());
      ready.set_kv_cache_bytes(cache_->bytes());
      ready.set_threads(pool_->num_threads());
      ready.set_communicator(comm_->backend());
    }
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
        case rill::internal::WorkerCommand::kSleepLevel:
          if (cmd.sleep_level() >= 1) cache_.reset();
          break;
        case rill::internal::WorkerCommand::kWakeUp:
          SetStatus(AllocateCache(), &reply);
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
  absl::Status AllocateCache() {
    if (cache_ != nullptr) return absl::OkStatus();
    absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create(model_->CacheShape(
        config_.num_blocks(), config_.block_size(),
        config_.kv_cache_f16() ? kernels::cpu::KvDtype::kF16 : kernels::cpu::KvDtype::kF32));
    if (!cache.ok()) return cache.status();
    cache_ = std::make_unique<PagedKvCache>(std::move(*cache));
    return absl::OkStatus();
  }

  // Runs the forward pass and sends the reply (with logits from rank 0).
  // Returns the forward's status.
  absl::Status RunStep(const rill::internal::StepCommand& step,
                       rill::internal::WorkerReply* reply) {
    ForwardBatch batch;
    batch.sequences.resize(step.sequences_size());
    for (int i = 0; i < step.sequences_size(); ++i) {
      const rill::internal::StepSequence& in = step.sequences(i);
      SequenceChunk& seq = batch.sequences[i];
      seq.tokens.assign(in.tokens().begin(), in.tokens().end());
      seq.start_pos = in.start_pos();
      seq.block_table.assign(in.block_table().begin(), in.block_table().end());
      seq.all_logits = in.all_logits();
    }
    comm_->TakeElapsed();  // Only this step's collectives count.
    absl::Status s = cache_ == nullptr ? absl::FailedPreconditionError("worker is asleep")
                                       : model_->Forward(batch, cache_.get(), &out_);
    ++steps_;
    SetStatus(s, reply);
    reply->set_collective_seconds(absl::ToDoubleSeconds(comm_->TakeElapsed()));
    if (!s.ok() || rank_ != 0) {
      (void)Send(fd_, *reply);
      return s;
    }
    const int64_t vocab = model_->config().vocab_size;
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
    info->set_rank(rank_);
    info->set_world_size(config_.world_size());
    info->set_pid(getpid());
    info->set_num_kv_heads(part_.num_kv_heads());
    info->set_q_head_begin(part_.q_head_begin);
    info->set_q_head_end(part_.q_head_end);
    info->set_ffn_begin(part_.ffn_begin);
    info->set_ffn_end(part_.ffn_end);
    info->set_expert_ffn_begin(part_.expert_ffn_begin);
    info->set_expert_ffn_end(part_.expert_ffn_end);
    info->set_kv_cache_bytes(cache_ ? cache_->bytes() : 0);
    info->set_threads(pool_->num_threads());
    info->set_communicator(comm_->backend());
    info->set_steps(steps_);
  }

  const int rank_;
  const rill::internal::WorkerConfig config_;
  const int fd_;
  std::unique_ptr<TimedCommunicator> comm_;
  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  TpPartition part_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<CausalLm> model_;
  std::unique_ptr<PagedKvCache> cache_;
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
  Worker worker(options.rank, config, *fd);
  const absl::Status init = worker.Init();
  if (absl::Status s = worker.SendReady(init); !s.ok()) return s;
  if (!init.ok()) return init;
  LOG(INFO) << "rank " << options.rank << " of " << config.world_size() << " ready";
  absl::Status served = worker.Serve();
  close(*fd);
  return served;
}

}  // namespace rill::worker
