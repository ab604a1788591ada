// Prints what TestSeed() and its streams give in a fresh process, for
// test_seed_test to check that RILL_TEST_SEED replays them.
#include <cstdio>

#include "tests/util/test_seed.h"

int main() {
  std::mt19937_64 rng = rill::tests::util::TestRng(1);
  std::printf("seed=%llu stream0=%llu rng1=%llu\n",
              static_cast<unsigned long long>(rill::tests::util::TestSeed()),
              static_cast<unsigned long long>(rill::tests::util::StreamSeed(0)),
              static_cast<unsigned long long>(rng()));
  return 0;
}
