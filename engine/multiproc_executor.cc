#include "engine/multiproc_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/kv_block_negotiation.h"
#include "kernels/cuda/plan/kv_memory_plan.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/ipc/frame.h"
#include "worker/ipc/step_wire.h"
#include "worker/kv_cache.h"
#include "worker/models/tp_plan.h"

extern char** environ;

namespace rill::engine {
namespace {

using rill::internal::WorkerCommand;
using rill::internal::WorkerReply;

std::string DescribeExit(int wstatus) {
  if (WIFEXITED(wstatus)) return absl::StrCat("exited with code ", WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wstatus), " (",
                        strsignal(WTERMSIG(wstatus)), ")");
  }
  return "stopped";
}

absl::Status FromReply(const WorkerReply& r, int rank) {
  if (r.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(r.code()),
                      absl::StrCat("worker rank ", rank, ": ", r.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MultiprocExecutor>> MultiprocExecutor::Create(
    const MultiprocExecutorOptions& options) {
  if (options.tensor_parallel_size < 1) {
    return absl::InvalidArgumentError("tensor_parallel_size must be >= 1");
  }
  if (options.block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("worker backend '", options.backend, "': expected cpu or cuda"));
  }
  const bool cuda = options.backend == "cuda";
  if (cuda) {
    if (absl::Status s =
            kernels::cuda::ValidateGpuMemoryUtilization(options.gpu_memory_utilization);
        !s.ok()) {
      return s;
    }
    if (options.max_batch_tokens < 1) {
      return absl::InvalidArgumentError("max_batch_tokens must be >= 1");
    }
    if (!options.cuda_devices.empty() &&
        static_cast<int>(options.cuda_devices.size()) != options.tensor_parallel_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cuda_devices lists ", options.cuda_devices.size(), " devices for ",
          options.tensor_parallel_size, " tensor-parallel ranks; list one per rank"));
    }
  }
  if (options.external_workers_dir.empty() && access(options.worker_binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("rill-worker binary not found or not executable: '",
                                            options.worker_binary,
                                            "' (set --worker_binary)"));
  }
  auto ex = std::unique_ptr<MultiprocExecutor>(new MultiprocExecutor(options));
  // The engine needs the config and tokenizer; the mapping is cheap and
  // shared with the page cache the workers use.
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(options.model_path);
  if (!ckpt.ok()) return ckpt.status();
  ex->checkpoint_ = std::move(*ckpt);
  const worker::loader::ModelConfig& c = ex->checkpoint_->config();
  if (c.architecture != "llama" && options.tensor_parallel_size > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor parallelism is implemented for the llama family; '", c.architecture,
        "' needs tensor_parallel_size 1"));
  }
  absl::StatusOr<int> kv_heads = worker::MaxKvHeadsPerRank(c, options.tensor_parallel_size);
  if (!kv_heads.ok()) return kv_heads.status();
  ex->num_blocks_ = options.num_blocks;
  if (cuda) {
    // The ranks join one NCCL communicator with this id; making it needs no
    // GPU, so the engine process needs none either.
    absl::StatusOr<std::string> id = worker::NewNcclUniqueId();
    if (!id.ok()) {
      return absl::Status(id.status().code(),
                          absl::StrCat("CUDA tensor-parallel ranks: ", id.status().message()));
    }
    ex->nccl_unique_id_ = std::move(*id);
  } else if (ex->num_blocks_ <= 0) {
    worker::KvCacheShape rank_shape;  // The rank holding the most K/V heads.
    rank_shape.num_layers = c.num_layers;
    rank_shape.block_size = options.block_size;
    rank_shape.num_kv_heads = *kv_heads;
    rank_shape.head_dim = c.head_dim;
    rank_shape.dtype = options.kv_cache_dtype;
    const int64_t block_bytes = rank_shape.block_bytes();
    ex->num_blocks_ = static_cast<int>(options.kv_cache_bytes / block_bytes);
    if (ex->num_blocks_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat("kv_cache_bytes ", options.kv_cache_bytes,
                                                     " is smaller than one KV block per rank (",
                                                     block_bytes, " bytes)"));
    }
  }
  const int cores = options.threads > 0
                        ? options.threads
                        : static_cast<int>(std::thread::hardware_concurrency());
  ex->threads_per_rank_ = std::max(1, cores / options.tensor_parallel_size);
  if (absl::Status s = ex->Start(); !s.ok()) return s;
  if (pipe2(ex->monitor_wake_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  ex->monitor_ = std::thread([raw = ex.get()] { raw->Monitor(); });
  LOG(INFO) << "multi-process executor: " << options.tensor_parallel_size << " "
            << options.backend << " ranks over " << ex->communicator() << " ("
            << (options.external_workers_dir.empty() ? options.worker_binary
                                                    : "external workers in " +
                                                          options.external_workers_dir)
            << "), " << ex->num_blocks_ << " KV blocks of "
            << options.block_size << " tokens per rank, " << ex->threads_per_rank_
            << " threads per rank";
  return ex;
}

std::string MultiprocExecutor::kernel_plan() const {
  return cuda() ? "" : options_.kernel_plan.Describe();
}

std::string MultiprocExecutor::communicator() const {
  if (cuda()) return "nccl";  // One rank too: it joins a communicator of one.
  return options_.tensor_parallel_size > 1 ? "gloo" : "none";
}

rill::internal::WorkerConfig MultiprocExecutor::WorkerConfigForRanks() const {
  rill::internal::WorkerConfig config;
  config.set_world_size(options_.tensor_parallel_size);
  config.set_model_path(options_.model_path);
  config.set_threads(threads_per_rank_);
  config.set_num_blocks(num_blocks_);
  config.set_block_size(options_.block_size);
  config.set_comm_timeout_s(options_.comm_timeout_s);
  config.set_backend(options_.backend);
  if (!cuda()) {
    config.set_rendezvous_dir(gloo_dir_);
    config.set_matmul(std::string(kernels::cpu::MatmulKindName(options_.kernel_plan.matmul)));
    config.set_kv_cache_f16(options_.kv_cache_dtype == kernels::cpu::KvDtype::kF16);
    return config;
  }
  config.set_nccl_unique_id(nccl_unique_id_);
  config.set_gpu_memory_utilization(options_.gpu_memory_utilization);
  config.set_max_batch_tokens(options_.max_batch_tokens);
  if (!options_.cuda_devices.empty()) {
    config.mutable_cuda_devices()->Add(options_.cuda_devices.begin(),
                                       options_.cuda_devices.end());
  } else if (spawned_) {
    // Ranks on this machine: rank r on device r. External workers (one GPU
    // per container) choose their own.
    for (int r = 0; r < options_.tensor_parallel_size; ++r) config.add_cuda_devices(r);
  }
  return config;
}

absl::Status MultiprocExecutor::AllocateKvBlocks(const std::vector<int64_t>& fits) {
  absl::StatusOr<int> blocks =
      NegotiateKvBlocks(fits, options_.num_blocks, options_.block_size, options_.max_model_len);
  if (!blocks.ok()) return blocks.status();
  num_blocks_ = *blocks;
  WorkerCommand cmd;
  cmd.set_allocate_kv_blocks(num_blocks_);
  absl::MutexLock lock(&io_mu_);
  std::vector<char> unused;
  absl::StatusOr<std::vector<WorkerReply>> replies = RoundTrip(std::move(cmd), &unused);
  if (!replies.ok()) return replies.status();
  kv_bytes_total_ = 0;
  for (int r = 0; r < static_cast<int>(replies->size()); ++r) {
    if (absl::Status s = FromReply((*replies)[r], r); !s.ok()) return s;
    kv_bytes_total_ += (*replies)[r].info().kv_cache_bytes();
  }
  LOG(INFO) << "cuda ranks: " << num_blocks_ << " KV blocks each (room per rank: "
            << absl::StrJoin(fits, ", ") << ")";
  return absl::OkStatus();
}

absl::Status MultiprocExecutor::Start() {
  spawned_ = options_.external_workers_dir.empty();
  if (spawned_) {
    char tmpl[] = "/tmp/rill-tp-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    }
    run_dir_ = tmpl;
    gloo_dir_ = run_dir_ + "/gloo";
  } else {
    run_dir_ = options_.external_workers_dir;
    // A fresh rendezvous for every engine start: gloo never deletes keys.
    gloo_dir_ = absl::StrCat(run_dir_, "/gloo-", getpid(), "-", absl::ToUnixMicros(absl::Now()));
  }
  const std::string sock_path = run_dir_ + "/control.sock";
  std::error_code ec;
  std::filesystem::create_directories(gloo_dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", gloo_dir_, ": ", ec.message()));
  if (sock_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path too long: ", sock_path));
  }
  unlink(sock_path.c_str());  // A stale socket of a previous engine.

  const int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd, options_.tensor_parallel_size) != 0) {
    const std::string err = std::strerror(errno);
    close(listen_fd);
    return absl::InternalError(absl::StrCat("control socket ", sock_path, ": ", err));
  }

  {
    absl::MutexLock lock(&state_mu_);
    ranks_.resize(options_.tensor_parallel_size);
    for (int r = 0; spawned_ && r < options_.tensor_parallel_size; ++r) {
      // Everything else comes in the WorkerConfig reply to the worker's hello.
      std::vector<std::string> args = {options_.worker_binary, absl::StrCat("--rank=", r),
                                       absl::StrCat("--control_socket=", sock_path)};
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid = -1;
      const int err = posix_spawn(&pid, options_.worker_binary.c_str(), nullptr, nullptr,
                                  argv.data(), environ);
      if (err != 0) {
        close(listen_fd);
        return MarkDeadLocked(absl::StrCat("cannot start ", options_.worker_binary, ": ",
                                           std::strerror(err)));
      }
      ranks_[r].pid = pid;
    }
  }
  if (!spawned_) {
    LOG(INFO) << "waiting for " << options_.tensor_parallel_size
              << " rill-worker processes to connect to " << sock_path;
  }
  std::vector<int64_t> fits;
  absl::Status accepted = AcceptWorkers(listen_fd, &fits);
  close(listen_fd);
  if (!accepted.ok() || !cuda()) return accepted;
  return AllocateKvBlocks(fits);
}

absl::Status MultiprocExecutor::AcceptWorkers(int listen_fd, std::vector<int64_t>* fits) {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  const int world = options_.tensor_parallel_size;
  std::vector<int> fds(world, -1);
  std::vector<bool> ready(world, false);
  fits->assign(world, 0);
  int connected = 0, num_ready = 0;
  std::vector<char> no_payload;
  while (num_ready < world) {
    {
      absl::MutexLock lock(&state_mu_);
      ReapExited();
      if (!dead_.ok()) return dead_;
    }
    if (absl::Now() > deadline) {
      return MarkDead(absl::StrCat("workers did not become ready within ",
                                   absl::FormatDuration(options_.start_timeout)));
    }
    std::vector<pollfd> pfds;
    if (connected < world) pfds.push_back({listen_fd, POLLIN, 0});
    for (int r = 0; r < world; ++r) {
      if (fds[r] >= 0 && !ready[r]) pfds.push_back({fds[r], POLLIN, 0});
    }
    if (poll(pfds.data(), pfds.size(), 200) <= 0) continue;
    for (const pollfd& p : pfds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      std::string header;
      if (p.fd == listen_fd) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        rill::internal::WorkerHello hello;
        if (!worker::ReadFrame(fd, &header, nullptr).ok() || !hello.ParseFromString(header) ||
            hello.rank() < 0 || hello.rank() >= world || fds[hello.rank()] >= 0) {
          close(fd);
          continue;
        }
        const rill::internal::WorkerConfig config = WorkerConfigForRanks();
        if (!worker::WriteFrame(fd, config.SerializeAsString()).ok()) {
          close(fd);
          continue;
        }
        fds[hello.rank()] = fd;
        {
          absl::MutexLock lock(&state_mu_);
          ranks_[hello.rank()].fd = fd;
          if (!spawned_) ranks_[hello.rank()].pid = -1;
        }
        ++connected;
        continue;
      }
      int rank = 0;
      while (fds[rank] != p.fd) ++rank;
      rill::internal::WorkerReady msg;
      absl::Status s = worker::ReadFrame(p.fd, &header, nullptr);
      if (!s.ok() || !msg.ParseFromString(header)) {
        absl::MutexLock lock(&state_mu_);
        ReapExited();
        return MarkDeadLocked(absl::StrCat("worker rank ", rank, " failed while loading",
                                           dead_.ok() ? "" : ": ", dead_.message()));
      }
      if (msg.code() != 0) {
        // Stop the other ranks (they may wait in NCCL's join for this one),
        // but keep the rank's own code: a missing GPU is FailedPrecondition,
        // a model too big ResourceExhausted, not a dead worker.
        const std::string reason =
            absl::StrCat("worker rank ", rank, " failed to start: ", msg.message());
        (void)MarkDead(reason);
        return absl::Status(static_cast<absl::StatusCode>(msg.code()), reason);
      }
      if (cuda()) {
        LOG(INFO) << "worker rank " << rank << " ready on " << msg.device() << " (NCCL "
                  << msg.nccl_version() << "), room for " << msg.kv_blocks_fit()
                  << " KV blocks";
      }
      (*fits)[rank] = msg.kv_blocks_fit();
      ready[rank] = true;
      ++num_ready;
      absl::MutexLock lock(&io_mu_);
      kv_bytes_total_ += msg.kv_cache_bytes();
    }
  }
  return absl::OkStatus();
}

bool MultiprocExecutor::SetDeathCallback(DeathCallback callback) {
  absl::MutexLock lock(&callback_mu_);
  death_callback_ = std::move(callback);
  return true;
}

void MultiprocExecutor::Monitor() {
  std::vector<int> fds;
  {
    absl::MutexLock lock(&state_mu_);
    for (const Rank& r : ranks_) fds.push_back(r.fd);
  }
  while (true) {
    std::vector<pollfd> pfds;
    pfds.push_back({monitor_wake_[0], POLLIN, 0});
    // POLLRDHUP only: the step's own reads consume the data, never this thread.
    for (int fd : fds) pfds.push_back({fd, POLLRDHUP, 0});
    // The timeout also catches a spawned worker that exits while its
    // connection stays open (it cannot, but a reap costs nothing).
    const int n = poll(pfds.data(), pfds.size(), 1000);
    if (n < 0 && errno != EINTR) return;
    if (pfds[0].revents != 0) return;  // StopMonitor.
    std::string hung_up;
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        absl::StrAppend(&hung_up, hung_up.empty() ? "" : ", ", i - 1);
      }
    }
    absl::Status dead;
    {
      // Let the peers of a killed rank exit too, so the reason names them.
      if (!hung_up.empty()) absl::SleepFor(absl::Milliseconds(150));
      absl::MutexLock lock(&state_mu_);
      ReapExited();
      if (!hung_up.empty() && dead_.ok()) {
        (void)MarkDeadLocked(absl::StrCat("worker rank ", hung_up, " closed its connection"));
      }
      dead = dead_;
    }
    if (!dead.ok()) {
      absl::MutexLock lock(&callback_mu_);
      if (death_callback_) death_callback_(dead);
      return;
    }
  }
}

void MultiprocExecutor::StopMonitor() {
  if (!monitor_.joinable()) return;
  const char byte = 0;
  (void)!write(monitor_wake_[1], &byte, 1);
  monitor_.join();
}

MultiprocExecutor::~MultiprocExecutor() {
  // First: the shutdown below makes every connection hang up.
  StopMonitor();
  for (int& fd : monitor_wake_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  bool alive;
  {
    absl::MutexLock lock(&state_mu_);
    alive = dead_.ok();
  }
  if (alive) {
    WorkerCommand cmd;
    cmd.set_shutdown(true);
    absl::MutexLock lock(&io_mu_);
    (void)Broadcast(cmd.SerializeAsString());
  }
  absl::MutexLock lock(&state_mu_);
  // Grace period for a clean exit, then kill what is left.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (Rank& r : ranks_) {
    while (r.pid > 0 && !r.exited) {
      int ws = 0;
      if (waitpid(r.pid, &ws, WNOHANG) == r.pid) {
        r.exited = true;
      } else if (absl::Now() > deadline) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, &ws, 0);
        r.exited = true;
      } else {
        absl::SleepFor(absl::Milliseconds(10));
      }
    }
    if (r.fd >= 0) close(r.fd);
  }
  std::error_code ec;
  if (spawned_) {
    if (!run_dir_.empty()) std::filesystem::remove_all(run_dir_, ec);
  } else {
    // The directory is shared with the worker containers: remove only ours.
    std::filesystem::remove(run_dir_ + "/control.sock", ec);
    std::filesystem::remove_all(gloo_dir_, ec);
  }
}

void MultiprocExecutor::ReapExited() {
  std::string exits;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.pid <= 0 || r.exited) continue;
    int ws = 0;
    if (waitpid(r.pid, &ws, WNOHANG) == r.pid) {
      r.exited = true;
      absl::StrAppend(&exits, exits.empty() ? "" : "; ", "worker rank ", i, " (pid ", r.pid,
                      ") ", DescribeExit(ws));
    }
  }
  if (!exits.empty() && dead_.ok()) (void)MarkDeadLocked(exits);
}

absl::Status MultiprocExecutor::DeadAfterFailure(int rank, const std::string& what) {
  // One rank's death makes its peers fail their collective and exit too;
  // give them a moment so the reason names every rank that went, the
  // killed one included, rather than only the first to be noticed.
  absl::SleepFor(absl::Milliseconds(150));
  absl::MutexLock lock(&state_mu_);
  ReapExited();
  return MarkDeadLocked(absl::StrCat("worker rank ", rank, " (pid ", ranks_[rank].pid, ") ", what));
}

absl::Status MultiprocExecutor::MarkDead(const std::string& reason) {
  absl::MutexLock lock(&state_mu_);
  return MarkDeadLocked(reason);
}

absl::Status MultiprocExecutor::MarkDeadLocked(const std::string& reason) {
  if (dead_.ok()) {
    dead_ = absl::UnavailableError(
        absl::StrCat(reason, "; tensor-parallel workers stopped, restart the engine"));
    LOG(ERROR) << "multi-process executor is dead: " << reason;
    // The surviving ranks would wait in a collective for the lost one.
    for (Rank& r : ranks_) {
      if (r.pid > 0 && !r.exited) kill(r.pid, SIGKILL);
    }
  }
  return dead_;
}

absl::Status MultiprocExecutor::Dead() const {
  absl::MutexLock lock(&state_mu_);
  return dead_;
}

absl::Status MultiprocExecutor::CheckHealth() {
  absl::MutexLock lock(&state_mu_);
  ReapExited();
  return dead_;
}

std::vector<pid_t> MultiprocExecutor::worker_pids() const {
  absl::MutexLock lock(&state_mu_);
  std::vector<pid_t> pids;
  for (const Rank& r : ranks_) pids.push_back(r.pid);
  return pids;
}

int64_t MultiprocExecutor::kv_cache_bytes() const {
  absl::MutexLock lock(&io_mu_);
  return asleep_ ? 0 : kv_bytes_total_;
}

MultiprocExecutor::BroadcastStats MultiprocExecutor::broadcast_stats() const {
  absl::MutexLock lock(&io_mu_);
  return {broadcasts_, broadcast_total_};
}

absl::Status MultiprocExecutor::Broadcast(const std::string& bytes) {
  std::vector<int> fds;
  {
    absl::MutexLock lock(&state_mu_);
    if (!dead_.ok()) return dead_;
    for (const Rank& r : ranks_) fds.push_back(r.fd);
  }
  for (size_t r = 0; r < fds.size(); ++r) {
    if (absl::Status s = worker::WriteFrame(fds[r], bytes); !s.ok()) {
      absl::MutexLock lock(&state_mu_);
      ReapExited();
      return MarkDeadLocked(absl::StrCat("worker rank ", r, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WorkerReply>> MultiprocExecutor::RoundTrip(
    WorkerCommand cmd, std::vector<char>* rank0_payload) {
  cmd.set_seq(next_seq_++);
  const absl::Time t0 = absl::Now();
  if (absl::Status s = Broadcast(cmd.SerializeAsString()); !s.ok()) return s;
  if (cmd.has_step()) {
    broadcast_total_ += absl::Now() - t0;
    ++broadcasts_;
  }
  const int world = options_.tensor_parallel_size;
  std::vector<int> fds;
  {
    absl::MutexLock lock(&state_mu_);
    for (const Rank& r : ranks_) fds.push_back(r.fd);
  }
  std::vector<WorkerReply> replies(world);
  std::vector<bool> got(world, false);
  int remaining = world;
  // Wait on every rank at once: whichever dies first is noticed at once,
  // even while another rank is stuck in a collective waiting for it.
  while (remaining > 0) {
    std::vector<pollfd> pfds;
    for (int r = 0; r < world; ++r) {
      if (!got[r]) pfds.push_back({fds[r], POLLIN, 0});
    }
    const int n = poll(pfds.data(), pfds.size(), 1000);
    if (n < 0 && errno != EINTR) return MarkDead(absl::StrCat("poll: ", std::strerror(errno)));
    if (n <= 0) {
      absl::MutexLock lock(&state_mu_);
      ReapExited();
      if (!dead_.ok()) return dead_;
      continue;
    }
    for (const pollfd& p : pfds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int rank = 0;
      while (fds[rank] != p.fd) ++rank;
      std::string header;
      std::vector<char> scratch;
      absl::Status s = worker::ReadFrame(p.fd, &header, rank == 0 ? rank0_payload : &scratch);
      if (!s.ok() || !replies[rank].ParseFromString(header) ||
          replies[rank].seq() != cmd.seq()) {
        return DeadAfterFailure(rank, absl::StrCat("broke its control channel: ",
                                                   s.ok() ? "bad reply" : s.message()));
      }
      got[rank] = true;
      --remaining;
    }
  }
  return replies;
}

absl::Status MultiprocExecutor::Execute(const worker::ForwardBatch& batch,
                                        worker::ForwardOutput* out) {
  WorkerCommand cmd;
  rill::internal::StepCommand* step = cmd.mutable_step();
  for (const worker::SequenceChunk& s : batch.sequences) {
    if (s.lora != nullptr) {
      // LoadLora refuses adapters here, so this is only a safety net.
      return absl::UnimplementedError("LoRA adapters need tensor_parallel_size 1");
    }
    worker::SequenceToWire(s, step->add_sequences());
  }
  absl::MutexLock lock(&io_mu_);
  last_collective_ = absl::ZeroDuration();
  absl::StatusOr<std::vector<WorkerReply>> replies = RoundTrip(std::move(cmd), &payload_);
  if (!replies.ok()) return replies.status();
  for (int r = 0; r < static_cast<int>(replies->size()); ++r) {
    const WorkerReply& reply = (*replies)[r];
    if (reply.code() == static_cast<int>(absl::StatusCode::kUnavailable)) {
      return DeadAfterFailure(r, reply.message());
    }
    if (absl::Status s = FromReply(reply, r); !s.ok()) return s;
    last_collective_ =
        std::max(last_collective_, absl::Seconds(std::max(0.0, reply.collective_seconds())));
  }
  const WorkerReply& r0 = (*replies)[0];
  const int64_t vocab = r0.vocab();
  int64_t total_rows = 0;
  for (int rows : r0.logit_rows()) total_rows += rows;
  if (r0.logit_rows_size() != static_cast<int>(batch.sequences.size()) ||
      static_cast<int64_t>(payload_.size()) != total_rows * vocab * int64_t{sizeof(float)}) {
    return MarkDead("worker rank 0 returned logits of the wrong size");
  }
  if (r0.sampled_size() != 0 && r0.sampled_size() != static_cast<int>(batch.sequences.size())) {
    return MarkDead("worker rank 0 returned sampled tokens for the wrong number of sequences");
  }
  out->logits.resize(batch.sequences.size());
  const float* f = reinterpret_cast<const float*>(payload_.data());
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const int64_t n = r0.logit_rows(s) * vocab;
    out->logits[s].assign(f, f + n);
    f += n;
  }
  out->sampled.clear();
  for (const rill::internal::SampledToken& t : r0.sampled()) {
    out->sampled.push_back(worker::SampledFromWire(t));
  }
  return absl::OkStatus();
}

absl::Status MultiprocExecutor::Command(WorkerCommand cmd) {
  absl::MutexLock lock(&io_mu_);
  std::vector<char> unused;
  absl::StatusOr<std::vector<WorkerReply>> replies = RoundTrip(std::move(cmd), &unused);
  if (!replies.ok()) return replies.status();
  for (int r = 0; r < static_cast<int>(replies->size()); ++r) {
    if (absl::Status s = FromReply((*replies)[r], r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status MultiprocExecutor::Sleep(int level) {
  WorkerCommand cmd;
  cmd.set_sleep_level(level);
  absl::Status s = Command(std::move(cmd));
  if (s.ok() && level >= 1) {
    absl::MutexLock lock(&io_mu_);
    asleep_ = true;
  }
  return s;
}

absl::Status MultiprocExecutor::WakeUp() {
  WorkerCommand cmd;
  cmd.set_wake_up(true);
  absl::Status s = Command(std::move(cmd));
  if (s.ok()) {
    absl::MutexLock lock(&io_mu_);
    asleep_ = false;
  }
  return s;
}

absl::StatusOr<std::vector<std::string>> MultiprocExecutor::CollectiveRpc(
    const std::string& method) {
  WorkerCommand cmd;
  if (method == "ping") {
    cmd.set_ping(true);
  } else if (method == "get_worker_info") {
    cmd.set_get_info(true);
  } else {
    return NotAllowListed(method);
  }
  absl::MutexLock lock(&io_mu_);
  std::vector<char> unused;
  absl::StatusOr<std::vector<WorkerReply>> replies = RoundTrip(std::move(cmd), &unused);
  if (!replies.ok()) return replies.status();
  std::vector<std::string> results;
  for (int r = 0; r < static_cast<int>(replies->size()); ++r) {
    const WorkerReply& reply = (*replies)[r];
    if (absl::Status s = FromReply(reply, r); !s.ok()) return s;
    if (method == "ping") {
      results.push_back("\"pong\"");
      continue;
    }
    const rill::internal::WorkerInfo& i = reply.info();
    results.push_back(absl::StrCat(
        "{\"rank\":", i.rank(), ",\"world_size\":", i.world_size(), ",\"pid\":", i.pid(),
        ",\"threads\":", i.threads(), ",\"kv_cache_bytes\":", i.kv_cache_bytes(),
        ",\"num_kv_heads\":", i.num_kv_heads(), ",\"q_heads\":[", i.q_head_begin(), ",",
        i.q_head_end(), "],\"ffn\":[", i.ffn_begin(), ",", i.ffn_end(), "],\"expert_ffn\":[",
        i.expert_ffn_begin(), ",", i.expert_ffn_end(), "],\"communicator\":\"", i.communicator(),
        "\",\"backend\":\"", i.backend(), "\"",
        i.device().empty() ? "" : absl::StrCat(",\"device\":\"", i.device(), "\""),
        i.nccl_version().empty() ? "" : absl::StrCat(",\"nccl_version\":\"", i.nccl_version(), "\""),
        ",\"steps\":", i.steps(), ",\"process\":\"rill-worker\"}"));
  }
  return results;
}

}  // namespace rill::engine
