// One replayable seed for a test process's random inputs. The seed is
// $RILL_TEST_SEED when set, else drawn once from std::random_device; it is
// printed to stderr on first use so a failing run names it, and
// `bazel test --test_env=RILL_TEST_SEED=<seed> //pkg:test` replays it.
#ifndef RILL_TESTS_UTIL_TEST_SEED_H_
#define RILL_TESTS_UTIL_TEST_SEED_H_

#include <cstdint>
#include <random>

namespace rill::tests::util {

// The process's seed; the same value on every call, from any thread.
// Aborts with a message when $RILL_TEST_SEED is set but not a uint64.
uint64_t TestSeed();

// The seed of the independent stream `stream` (a label the caller picks,
// e.g. one per test): a fixed function of TestSeed() and `stream`, so each
// test's inputs replay no matter which other tests ran first.
uint64_t StreamSeed(uint64_t stream);

// A generator seeded with StreamSeed(stream). Suites whose helpers take a
// std::mt19937 seed one with StreamSeed(stream) instead.
std::mt19937_64 TestRng(uint64_t stream);

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_TEST_SEED_H_
