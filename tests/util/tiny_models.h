// Tests over the tiny random models of tests/reference/make_tiny_models.py:
// one fixture base that generates them once per suite (fresh weights each
// run), and a gtest parameter name for a model's relative path.
#ifndef RILL_TESTS_UTIL_TINY_MODELS_H_
#define RILL_TESTS_UTIL_TINY_MODELS_H_

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "tests/util/test_seed.h"

namespace rill::tests::util {

// Writes every tiny model under `dir` with weights drawn from `seed`;
// records a gtest failure naming the cause when the generator fails.
void MakeTinyModels(const std::string& dir, uint32_t seed);
// Where a suite's tiny models go: <test temp dir>/tiny.
std::string TinyModelsDir();

// Derive a fixture from TinyModels<::testing::Test> or
// TinyModels<::testing::TestWithParam<std::string>>: the suite's set-up
// writes the models under dir_ with weights from seed_ (random per run,
// replayed by RILL_TEST_SEED).
template <class Base>
class TinyModels : public Base {
 protected:
  static void SetUpTestSuite() {
    seed_ = static_cast<uint32_t>(StreamSeed(kTinyModelsStream));
    dir_ = TinyModelsDir();
    MakeTinyModels(dir_, seed_);
  }
  // Apart from the streams the suites number from 0 for their own inputs.
  static constexpr uint64_t kTinyModelsStream = 1000;
  static inline uint32_t seed_ = 0;
  static inline std::string dir_;
};

// "llama_gqa/model.q8_0.gguf" -> "llama_gqa_model_q8_0_gguf", for
// INSTANTIATE_TEST_SUITE_P over model paths.
std::string TinyModelTestName(const ::testing::TestParamInfo<std::string>& info);

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_TINY_MODELS_H_
