#include "kernels/cpu/ggml_type.h"

#include <gtest/gtest.h>

#include "kernels/cpu/quant_types.h"

namespace rill::kernels::cpu {
namespace {

struct Expected {
  GgmlType type;
  uint32_t id;
  const char* name;
  int64_t block_size;
  size_t bytes_per_block;
};

// ggml's ggml.c type_traits, id by id.
constexpr Expected kExpected[] = {
    {GgmlType::kF32, 0, "f32", 1, 4},        {GgmlType::kF16, 1, "f16", 1, 2},
    {GgmlType::kQ4_0, 2, "q4_0", 32, 18},    {GgmlType::kQ4_1, 3, "q4_1", 32, 20},
    {GgmlType::kQ5_0, 6, "q5_0", 32, 22},    {GgmlType::kQ5_1, 7, "q5_1", 32, 24},
    {GgmlType::kQ8_0, 8, "q8_0", 32, 34},    {GgmlType::kQ8_1, 9, "q8_1", 32, 36},
    {GgmlType::kQ2_K, 10, "q2_K", 256, 84},  {GgmlType::kQ3_K, 11, "q3_K", 256, 110},
    {GgmlType::kQ4_K, 12, "q4_K", 256, 144}, {GgmlType::kQ5_K, 13, "q5_K", 256, 176},
    {GgmlType::kQ6_K, 14, "q6_K", 256, 210}, {GgmlType::kQ8_K, 15, "q8_K", 256, 292},
    {GgmlType::kI8, 24, "i8", 1, 1},         {GgmlType::kI16, 25, "i16", 1, 2},
    {GgmlType::kI32, 26, "i32", 1, 4},       {GgmlType::kI64, 27, "i64", 1, 8},
    {GgmlType::kF64, 28, "f64", 1, 8},       {GgmlType::kBF16, 30, "bf16", 1, 2},
};

TEST(GgmlTypeTraits, EachTypesIdNameAndSizes) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(static_cast<uint32_t>(e.type), e.id);
    const GgmlTypeTraits t = GgmlTypeTraitsOf(e.type);
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.block_size, e.block_size);
    EXPECT_EQ(t.bytes_per_block, e.bytes_per_block);
    EXPECT_EQ(GgmlTypeName(e.type), e.name);
    ASSERT_TRUE(GetGgmlTypeTraits(e.id).has_value());
    EXPECT_EQ(GetGgmlTypeTraits(e.id)->bytes_per_block, e.bytes_per_block);
  }
}

TEST(GgmlTypeTraits, UnknownIdsHaveNone) {
  EXPECT_FALSE(GetGgmlTypeTraits(4).has_value());  // removed Q4_2
  EXPECT_FALSE(GetGgmlTypeTraits(5).has_value());  // removed Q4_3
  EXPECT_FALSE(GetGgmlTypeTraits(1000).has_value());
}

// The kernels' block structs are the table's bytes: the loader's sizes and
// the kernels' strides cannot disagree.
TEST(GgmlTypeTraits, KernelBlocksMatchTheTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), GgmlTypeTraitsOf(GgmlType::kQ4_0).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ4_1), GgmlTypeTraitsOf(GgmlType::kQ4_1).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ5_0), GgmlTypeTraitsOf(GgmlType::kQ5_0).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ5_1), GgmlTypeTraitsOf(GgmlType::kQ5_1).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ8_0), GgmlTypeTraitsOf(GgmlType::kQ8_0).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ2_K), GgmlTypeTraitsOf(GgmlType::kQ2_K).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ3_K), GgmlTypeTraitsOf(GgmlType::kQ3_K).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ4_K), GgmlTypeTraitsOf(GgmlType::kQ4_K).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ5_K), GgmlTypeTraitsOf(GgmlType::kQ5_K).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ6_K), GgmlTypeTraitsOf(GgmlType::kQ6_K).bytes_per_block);
  EXPECT_EQ(sizeof(BlockQ8_K), GgmlTypeTraitsOf(GgmlType::kQ8_K).bytes_per_block);
  EXPECT_EQ(BlockElems(GgmlType::kQ4_K), 256);
  EXPECT_EQ(BlockBytes(GgmlType::kQ4_K), 144u);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_1, 576), 18u * 20);
}

TEST(GgmlTensorBytes, BlocksTimesBytesAndItsLimits) {
  const int64_t ne[2] = {64, 3};
  EXPECT_EQ(GgmlTensorBytes(GgmlType::kQ4_1, ne, 2), 6u * 20u);
  const int64_t bad_row[1] = {33};
  EXPECT_FALSE(GgmlTensorBytes(GgmlType::kQ8_0, bad_row, 1).has_value());
  const int64_t negative[1] = {-1};
  EXPECT_FALSE(GgmlTensorBytes(GgmlType::kF32, negative, 1).has_value());
}

// Only the types with dequantization (and kernels) behind them run.
TEST(GgmlType, KernelsRunTheTypesTheyDequantize) {
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0,
                     GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                     GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                     GgmlType::kQ6_K}) {
    EXPECT_TRUE(CanDequantize(t)) << GgmlTypeName(t);
  }
  for (GgmlType t : {GgmlType::kQ8_1, GgmlType::kQ8_K, GgmlType::kI8, GgmlType::kI16,
                     GgmlType::kI32, GgmlType::kI64, GgmlType::kF64}) {
    EXPECT_FALSE(CanDequantize(t)) << GgmlTypeName(t);
  }
}

}  // namespace
}  // namespace rill::kernels::cpu
