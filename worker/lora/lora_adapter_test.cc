// Loading PEFT adapters: what is read, and the clear errors for files this
// runtime cannot or must not use.
#include "worker/lora/lora_adapter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/safetensors_writer.h"
#include "worker/lora/lora_test_util.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {
namespace {

using testing::AdapterSpec;
using testing::TinySpec;

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(testing::TempDir(), "/adapters_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(
        testing::WriteGgufModel(dir_ + "/model.gguf", spec_, testing::RandomModel(spec_, &rng_))
            .ok());
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> c =
        worker::loader::LoadCheckpoint(dir_ + "/model.gguf");
    ASSERT_TRUE(c.ok()) << c.status();
    ckpt_ = std::move(*c);
  }

  // Writes an adapter (tensors from `tensor_spec`, config from `config` or
  // `a`) and loads it.
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> WriteAndLoad(
      const std::string& name, const AdapterSpec& a, const std::string& config = "",
      const AdapterSpec* tensor_spec = nullptr, LoraLoadOptions options = {}) {
    const std::string d = dir_ + "/" + name;
    testing::Weights t = testing::RandomAdapter(spec_, tensor_spec ? *tensor_spec : a, &rng_);
    if (absl::Status s = testing::WriteAdapter(d, a, t, config); !s.ok()) return s;
    return LoadLoraAdapter(d, ckpt_->config(), options);
  }

  std::string ConfigWith(const AdapterSpec& a, const std::string& extra) {
    std::string json = testing::AdapterConfigJson(a);
    json.pop_back();  // '}'
    return json + ", " + extra + "}";
  }

  TinySpec spec_;
  std::mt19937 rng_{42};
  std::string dir_;
  std::unique_ptr<worker::loader::Checkpoint> ckpt_;
};

void ExpectError(const absl::StatusOr<std::shared_ptr<const LoraAdapter>>& r, absl::StatusCode code,
                 const std::string& needle) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status();
}

TEST_F(LoraAdapterTest, LoadsRankScaleAndTargets) {
  AdapterSpec a;
  a.rank = 4;
  a.alpha = 16;
  a.targets = {"v_proj", "q_proj"};
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> l = WriteAndLoad("ok", a);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)->rank, 4);
  EXPECT_FLOAT_EQ((*l)->scale, 4.0f);
  EXPECT_EQ((*l)->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_FALSE((*l)->weights(1, LoraModule::kQ).empty());
  EXPECT_TRUE((*l)->weights(1, LoraModule::kK).empty());
  EXPECT_EQ((*l)->weights(0, LoraModule::kV).out, spec_.kv_heads * spec_.head_dim);

  a.use_rslora = true;
  l = WriteAndLoad("rslora", a);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_FLOAT_EQ((*l)->scale, 8.0f);  // 16 / sqrt(4)
}

TEST_F(LoraAdapterTest, TargetModulesAsString) {
  AdapterSpec a;  // All seven modules.
  std::string config = testing::AdapterConfigJson(a);
  const size_t b = config.find("\"target_modules\": [");
  const size_t e = config.find(']', b);
  config.replace(b, e - b + 1, "\"target_modules\": \"all-linear\"");
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> l = WriteAndLoad("all_linear", a, config);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)->target_modules.size(), 7u);
}

TEST_F(LoraAdapterTest, MissingFilesAreNotFound) {
  ExpectError(LoadLoraAdapter(dir_ + "/nope", ckpt_->config()), absl::StatusCode::kNotFound,
              dir_ + "/nope");
  AdapterSpec a;
  ASSERT_TRUE(WriteAndLoad("no_weights", a).ok());
  std::filesystem::remove(dir_ + "/no_weights/adapter_model.safetensors");
  ExpectError(LoadLoraAdapter(dir_ + "/no_weights", ckpt_->config()), absl::StatusCode::kNotFound,
              "adapter_model.safetensors");
  std::filesystem::remove(dir_ + "/no_weights/adapter_config.json");
  ExpectError(LoadLoraAdapter(dir_ + "/no_weights", ckpt_->config()), absl::StatusCode::kNotFound,
              "adapter_config.json");
}

TEST_F(LoraAdapterTest, RankAboveLimitIsRefused) {
  AdapterSpec a;
  a.rank = 16;
  ExpectError(WriteAndLoad("big", a, "", nullptr, LoraLoadOptions{.max_rank = 8}),
              absl::StatusCode::kInvalidArgument, "rank 16 exceeds max_lora_rank 8");
}

TEST_F(LoraAdapterTest, WrongRankInTensorsNamesTensorAndShapes) {
  AdapterSpec config;
  config.rank = 4;
  AdapterSpec tensors = config;
  tensors.rank = 8;
  ExpectError(WriteAndLoad("wrong_rank", config, "", &tensors), absl::StatusCode::kInvalidArgument,
              "has shape [8, 48], expected [4, 48]");
}

TEST_F(LoraAdapterTest, ShapeMismatchWithModelIsRefused) {
  // An adapter made for a wider model.
  AdapterSpec a;
  a.targets = {"up_proj"};
  TinySpec wide = spec_;
  wide.ffn = 64;
  const std::string d = dir_ + "/wide";
  ASSERT_TRUE(testing::WriteAdapter(d, a, testing::RandomAdapter(wide, a, &rng_)).ok());
  ExpectError(LoadLoraAdapter(d, ckpt_->config()), absl::StatusCode::kInvalidArgument,
              "has shape [64, 4], expected [48, 4]");
}

TEST_F(LoraAdapterTest, UnknownTargetModuleIsRefused) {
  AdapterSpec a;
  a.targets = {"q_proj", "lm_head"};
  AdapterSpec tensors;
  tensors.targets = {"q_proj"};
  ExpectError(WriteAndLoad("unknown", a, "", &tensors), absl::StatusCode::kInvalidArgument,
              "unknown target module 'lm_head'");
}

TEST_F(LoraAdapterTest, UnsupportedOptionsAreRefused) {
  AdapterSpec a;
  ExpectError(WriteAndLoad("fifo", a, ConfigWith(a, "\"fan_in_fan_out\": true")),
              absl::StatusCode::kInvalidArgument, "fan_in_fan_out");
  ExpectError(WriteAndLoad("mts", a, ConfigWith(a, "\"modules_to_save\": [\"lm_head\"]")),
              absl::StatusCode::kInvalidArgument, "modules_to_save");
  ExpectError(WriteAndLoad("dora", a, ConfigWith(a, "\"use_dora\": true")),
              absl::StatusCode::kInvalidArgument, "DoRA");
  ExpectError(WriteAndLoad("bias", a, ConfigWith(a, "\"bias\": \"all\"")),
              absl::StatusCode::kInvalidArgument, "bias");
  ExpectError(WriteAndLoad("badjson", a, "{\"r\": "), absl::StatusCode::kInvalidArgument,
              "adapter_config.json");
  ExpectError(WriteAndLoad("norank", a, "{\"target_modules\": [\"q_proj\"]}"),
              absl::StatusCode::kInvalidArgument, "\"r\"");
}

TEST_F(LoraAdapterTest, TensorsMustMatchTargets) {
  AdapterSpec config;
  config.targets = {"q_proj"};
  AdapterSpec tensors;
  tensors.targets = {"q_proj", "k_proj"};
  ExpectError(WriteAndLoad("extra", config, "", &tensors), absl::StatusCode::kInvalidArgument,
              "target_modules does not list");
  AdapterSpec none = config;
  none.targets = {"k_proj"};
  config.targets = {"q_proj", "k_proj"};
  ExpectError(WriteAndLoad("missing", config, "", &none), absl::StatusCode::kInvalidArgument,
              "target module q_proj has no weights");
}

// PEFT often saves adapters in the model's dtype: BF16 tensors load as the
// same values in f32.
TEST_F(LoraAdapterTest, Bf16TensorsLoadLikeTheirF32Values) {
  AdapterSpec a;
  a.targets = {"q_proj", "down_proj"};
  testing::Weights t = testing::RandomAdapter(spec_, a, &rng_);
  worker::loader::SafetensorsWriter bf16;
  for (auto& [name, tensor] : t) {
    std::string data(tensor.values.size() * 2, '\0');
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &tensor.values[i], 4);
      bits &= 0xffff0000u;  // Exactly representable in BF16.
      std::memcpy(&tensor.values[i], &bits, 4);
      const uint16_t hi = bits >> 16;
      std::memcpy(&data[2 * i], &hi, 2);
    }
    bf16.AddTensor(name, "BF16", tensor.shape, data);
  }
  ASSERT_TRUE(testing::WriteAdapter(dir_ + "/f32", a, t).ok());
  ASSERT_TRUE(testing::WriteAdapter(dir_ + "/bf16", a, t).ok());
  ASSERT_TRUE(bf16.WriteFile(dir_ + "/bf16/adapter_model.safetensors").ok());
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> x =
      LoadLoraAdapter(dir_ + "/f32", ckpt_->config());
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> y =
      LoadLoraAdapter(dir_ + "/bf16", ckpt_->config());
  ASSERT_TRUE(x.ok() && y.ok()) << x.status() << " " << y.status();
  for (int64_t l = 0; l < spec_.layers; ++l) {
    for (LoraModule m : {LoraModule::kQ, LoraModule::kDown}) {
      EXPECT_EQ((*x)->weights(l, m).a, (*y)->weights(l, m).a);
      EXPECT_EQ((*x)->weights(l, m).b, (*y)->weights(l, m).b);
    }
  }
}

TEST_F(LoraAdapterTest, CorruptWeightsFileIsInvalidArgument) {
  AdapterSpec a;
  ASSERT_TRUE(WriteAndLoad("corrupt", a).ok());
  std::ofstream(dir_ + "/corrupt/adapter_model.safetensors", std::ios::trunc) << "not a file";
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> r =
      LoadLoraAdapter(dir_ + "/corrupt", ckpt_->config());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

TEST_F(LoraAdapterTest, NonLlamaArchitectureIsUnimplemented) {
  worker::loader::ModelConfig gpt2 = ckpt_->config();
  gpt2.architecture = "gpt2";
  AdapterSpec a;
  ASSERT_TRUE(WriteAndLoad("for_gpt2", a).ok());
  ExpectError(LoadLoraAdapter(dir_ + "/for_gpt2", gpt2), absl::StatusCode::kUnimplemented,
              "Llama family");
}

TEST_F(LoraAdapterTest, ForwardRefusesAdapterOfAnotherModel) {
  AdapterSpec a;
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> l = WriteAndLoad("other", a);
  ASSERT_TRUE(l.ok());
  TinySpec deeper = spec_;
  deeper.layers = 3;
  ASSERT_TRUE(
      testing::WriteGgufModel(dir_ + "/deeper.gguf", deeper, testing::RandomModel(deeper, &rng_))
          .ok());
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> c =
      worker::loader::LoadCheckpoint(dir_ + "/deeper.gguf");
  ASSERT_TRUE(c.ok());
  kernels::cpu::ThreadPool pool(1);
  absl::StatusOr<std::unique_ptr<CausalLm>> model =
      CreateCausalLm(std::shared_ptr<const worker::loader::Checkpoint>(std::move(*c)), &pool);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create((*model)->CacheShape(2, 16));
  ASSERT_TRUE(cache.ok());
  ForwardBatch b;
  SequenceChunk& s = b.sequences.emplace_back();
  s.tokens = {1, 2, 3};
  s.block_table = {0};
  s.lora = *l;
  ForwardOutput out;
  absl::Status st = (*model)->Forward(b, &*cache, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("2 layers"), std::string::npos) << st;
}

}  // namespace
}  // namespace rill::worker
