// A libFuzzer-compatible driver for gcc builds without libFuzzer: replays a
// checked-in corpus through LLVMFuzzerTestOneInput, then runs a bounded
// number of blind random mutations of it (bit flips, byte inserts/deletes,
// boundary integers, splices between corpus files). There is no coverage
// feedback; the point is that every CI run exercises each fuzz target on its
// corpus and on fresh nearby inputs with a seed printed in the log, so a
// regression shows up as a failing test. Real fuzzing is libFuzzer's job
// (worker/loader/fuzz/build.sh, tools/fuzz/run_fuzzers.sh).
//
// Usage: <test> [--fuzz_seconds=S] [--fuzz_iterations=N] [--fuzz_seed=K]
//               [--fuzz_max_len=L] CORPUS_DIR_OR_FILE...
// A crash (abort, CHECK, SIGSEGV) prints the seed and iteration and writes
// the input to $TEST_UNDECLARED_OUTPUTS_DIR (or /tmp) as crash-<iteration>
// (crash-replay for a corpus file);
// rerun with that file as the only argument and --fuzz_iterations=0.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(double, fuzz_seconds, 8.0, "Stop mutating after this many seconds.");
ABSL_FLAG(int64_t, fuzz_iterations, 5000000,
          "Stop mutating after this many inputs (0: replay the corpus only).");
ABSL_FLAG(uint64_t, fuzz_seed, 20261203, "Seed of the mutation RNG.");
ABSL_FLAG(int64_t, fuzz_max_len, 4096,
          "Largest mutated input (at least the largest corpus file).");

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

// What the signal handler reports: the input being run and where it came from.
const std::string* g_current = nullptr;
int64_t g_iteration = -1;  // -1: replaying corpus file g_current_name.
const char* g_current_name = "";
uint64_t g_seed = 0;

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Not strictly async-signal-safe (snprintf), but the process is dying anyway
// and the report is what makes the CI failure reproducible.
void OnDeadlySignal(int sig) {
  char msg[1024];
  int n;
  if (g_iteration < 0) {
    n = snprintf(msg, sizeof(msg), "\n==fuzz== signal %d while replaying corpus file %s\n",
                 sig, g_current_name);
  } else {
    n = snprintf(msg, sizeof(msg),
                 "\n==fuzz== signal %d at mutation iteration %lld (--fuzz_seed=%llu)\n", sig,
                 static_cast<long long>(g_iteration), static_cast<unsigned long long>(g_seed));
  }
  WriteAll(2, msg, n);
  if (g_current != nullptr) {
    const char* dir = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    char path[512];
    if (g_iteration < 0) {
      snprintf(path, sizeof(path), "%s/crash-replay", dir != nullptr ? dir : "/tmp");
    } else {
      snprintf(path, sizeof(path), "%s/crash-%lld", dir != nullptr ? dir : "/tmp",
               static_cast<long long>(g_iteration));
    }
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      WriteAll(fd, g_current->data(), g_current->size());
      close(fd);
      n = snprintf(msg, sizeof(msg), "==fuzz== input (%zu bytes) written to %s\n",
                   g_current->size(), path);
      WriteAll(2, msg, n);
    }
    // Short inputs also go to the log, so the CI output alone reproduces it.
    if (g_current->size() <= 256) {
      WriteAll(2, "==fuzz== hex: ", 14);
      for (unsigned char c : *g_current) {
        char h[3];
        snprintf(h, sizeof(h), "%02x", c);
        WriteAll(2, h, 2);
      }
      WriteAll(2, "\n", 1);
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallSignalHandlers() {
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnDeadlySignal);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Regular files under `path` (or `path` itself), sorted so runs are
// reproducible.
void ListFiles(const std::string& path, std::vector<std::string>* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    out->push_back(path);
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) ListFiles(path + "/" + n, out);
}

void RunOne(const std::string& input) {
  g_current = &input;
  // An exact-size heap copy, as libFuzzer passes it, so an overread is at
  // least likely to touch unowned memory.
  std::vector<uint8_t> copy(input.begin(), input.end());
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  g_current = nullptr;
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<std::string>* pool, size_t max_len)
      : rng_(seed), pool_(pool), max_len_(max_len) {}

  void Mutate(std::string* s) {
    const int rounds = 1 + Below(4);
    for (int r = 0; r < rounds; ++r) MutateOnce(s);
    if (s->size() > max_len_) s->resize(max_len_);
  }

  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

 private:
  void MutateOnce(std::string* s) {
    const size_t n = s->size();
    switch (Below(9)) {
      case 0:  // Flip one bit.
        if (n > 0) (*s)[Below(n)] ^= static_cast<char>(1u << Below(8));
        break;
      case 1:  // Overwrite a byte.
        if (n > 0) (*s)[Below(n)] = static_cast<char>(Below(256));
        break;
      case 2: {  // Insert 1-4 random bytes.
        const size_t k = 1 + Below(4);
        std::string ins;
        for (size_t i = 0; i < k; ++i) ins.push_back(static_cast<char>(Below(256)));
        s->insert(Below(n + 1), ins);
        break;
      }
      case 3:  // Delete a short range.
        if (n > 0) {
          const size_t at = Below(n);
          s->erase(at, 1 + Below(std::min<size_t>(16, n - at)));
        }
        break;
      case 4:  // Copy a range of itself elsewhere (repeats structure).
        if (n > 0) {
          const size_t from = Below(n);
          const size_t len = 1 + Below(std::min<size_t>(64, n - from));
          const std::string piece = s->substr(from, len);
          s->insert(Below(n + 1), piece);
        }
        break;
      case 5: {  // Splice in a chunk of another corpus input.
        const std::string& other = (*pool_)[Below(pool_->size())];
        if (other.empty()) break;
        const size_t from = Below(other.size());
        const size_t len = 1 + Below(std::min<size_t>(256, other.size() - from));
        if (Below(2) == 0 && n > 0) {
          const size_t at = Below(n);
          s->replace(at, std::min(len, n - at), other, from, len);
        } else {
          s->insert(Below(n + 1), other, from, len);
        }
        break;
      }
      case 6:  // Overwrite with a boundary integer (1, 2, 4 or 8 bytes LE).
        if (n > 0) {
          static constexpr uint64_t kValues[] = {
              0,          1,          0x7f,       0x80,       0xff,
              0x7fff,     0x8000,     0xffff,     0x7fffffff, 0x80000000,
              0xffffffff, 0xffffffffffffffffull, 0x7fffffffffffffffull, 0x100000000ull};
          uint64_t v = kValues[Below(sizeof(kValues) / sizeof(kValues[0]))];
          const size_t width = size_t{1} << Below(4);
          const size_t at = Below(n);
          for (size_t i = 0; i < width && at + i < n; ++i, v >>= 8) {
            (*s)[at + i] = static_cast<char>(v & 0xff);
          }
        }
        break;
      case 7:  // Nudge a byte up or down (digits, lengths, enum values).
        if (n > 0) (*s)[Below(n)] += Below(2) == 0 ? 1 : -1;
        break;
      case 8:  // Truncate.
        if (n > 0) s->resize(Below(n));
        break;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>* pool_;
  size_t max_len_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (LLVMFuzzerInitialize != nullptr) {
    int init_argc = 1;
    char** init_argv = argv;
    LLVMFuzzerInitialize(&init_argc, &init_argv);
  }
  std::vector<std::string> files;
  for (size_t i = 1; i < positional.size(); ++i) ListFiles(positional[i], &files);
  if (files.empty()) {
    fprintf(stderr, "no corpus files found in the paths given\n");
    return 1;
  }
  InstallSignalHandlers();

  std::vector<std::string> pool;
  size_t largest = 0;
  for (const std::string& f : files) {
    std::string data;
    if (!ReadFile(f, &data)) {
      fprintf(stderr, "cannot read %s\n", f.c_str());
      return 1;
    }
    g_current_name = f.c_str();
    RunOne(data);
    largest = std::max(largest, data.size());
    pool.push_back(std::move(data));
  }
  printf("replayed %zu corpus files (largest %zu bytes)\n", files.size(), largest);

  const int64_t max_iterations = absl::GetFlag(FLAGS_fuzz_iterations);
  const double max_seconds = absl::GetFlag(FLAGS_fuzz_seconds);
  g_seed = absl::GetFlag(FLAGS_fuzz_seed);
  const size_t max_len =
      std::max<size_t>(largest, static_cast<size_t>(absl::GetFlag(FLAGS_fuzz_max_len)));
  printf("mutating with --fuzz_seed=%llu for up to %lld inputs / %.1f s (max_len %zu)\n",
         static_cast<unsigned long long>(g_seed), static_cast<long long>(max_iterations),
         max_seconds, max_len);
  Mutator mutator(g_seed, &pool, max_len);
  const size_t corpus_size = pool.size();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int64_t it = 0;
  for (; it < max_iterations; ++it) {
    // The clock is read every 64 inputs; the RNG stream does not depend on it,
    // so a seed + iteration count reproduces an input exactly.
    if (it % 64 == 0 && elapsed() > max_seconds) break;
    std::string input = pool[mutator.Below(pool.size())];
    mutator.Mutate(&input);
    g_iteration = it;
    RunOne(input);
    // Keep some mutants as bases, so mutations stack up over the run.
    if (mutator.Below(16) == 0 && pool.size() < corpus_size + 4096) {
      pool.push_back(std::move(input));
    }
  }
  const double secs = elapsed();
  printf("ran %lld mutated inputs in %.1f s (%.0f/s), seed %llu: no crash\n",
         static_cast<long long>(it), secs, secs > 0 ? it / secs : 0.0,
         static_cast<unsigned long long>(g_seed));
  return 0;
}
