#include "tests/util/test_seed.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace rill::tests::util {
namespace {

constexpr char kSeedVariable[] = "RILL_TEST_SEED";

uint64_t ReadOrDrawSeed() {
  const char* env = std::getenv(kSeedVariable);
  if (env != nullptr && *env != '\0') {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(env, &seed)) {
      // A typo must not silently turn a replay into a fresh random run.
      std::fprintf(stderr, "%s='%s' is not an unsigned 64-bit integer\n", kSeedVariable, env);
      std::abort();
    }
    std::fprintf(stderr, "test seed %llu (from %s)\n", static_cast<unsigned long long>(seed),
                 kSeedVariable);
    return seed;
  }
  std::random_device device;
  const uint64_t seed = (static_cast<uint64_t>(device()) << 32) | device();
  std::fprintf(stderr, "test seed %llu (replay: bazel test --test_env=%s=%llu)\n",
               static_cast<unsigned long long>(seed), kSeedVariable,
               static_cast<unsigned long long>(seed));
  return seed;
}

// SplitMix64's finaliser: nearby (seed, stream) pairs give unrelated seeds.
uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t TestSeed() {
  static const uint64_t seed = ReadOrDrawSeed();
  return seed;
}

uint64_t StreamSeed(uint64_t stream) {
  return Mix(TestSeed() + 0x9e3779b97f4a7c15ULL * (stream + 1));
}

std::mt19937_64 TestRng(uint64_t stream) { return std::mt19937_64(StreamSeed(stream)); }

}  // namespace rill::tests::util
