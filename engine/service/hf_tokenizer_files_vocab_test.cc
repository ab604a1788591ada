// The tokenizer.json + tokenizer_config.json that VllmEngine/GetTokenizer
// writes for a GGUF (HfTokenizerFilesFromSpec), for each of llama.cpp's
// vocabularies Rill's tokenizer supports: Python `tokenizers` (what the smg
// gateway builds its tokenizer with) must load them and give Rill's ids for
// every golden text and more (special tokens in text, newline and space runs,
// bytes no token covers), with and without special tokens, and decode ids to
// Rill's text (with and without skip_special_tokens); Rill's own
// tokenizer.json reader must read them back into a tokenizer that encodes and
// decodes the same. A vocabulary whose files setup did not fetch is skipped
// with the reason printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json.h"
#include "engine/llama_cpp_vocab_goldens.h"
#include "engine/service/hf_tokenizer_files.h"
#include "engine/tokenizer_loader.h"
#include "tests/util/python_runner.h"
#include "tests/util/test_seed.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode_data.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "worker/loader/gguf.h"

namespace rill::engine::service {
namespace {

namespace json = base::json;
using engine::testing::Golden;

constexpr int64_t kMaxModelLen = 4096;

std::string IdsJson(const std::vector<int32_t>& ids) {
  return absl::StrCat("[", absl::StrJoin(ids, ","), "]");
}

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/hf_tokenizer_files/", name);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  ASSERT_TRUE(out.good()) << path;
}

// The vocabulary's GGUF and goldens, or a skip reason when setup has not
// fetched them.
struct VocabFiles {
  std::unique_ptr<worker::loader::GgufFile> gguf;
  std::vector<Golden> goldens;
  std::string missing;
};

VocabFiles OpenVocab(const std::string& name) {
  VocabFiles v;
  const std::string path = engine::testing::LlamaCppVocabPath(name);
  if (!std::filesystem::exists(path)) {
    v.missing = absl::StrCat(path, " is missing (tools/setup.sh fetches llama.cpp's vocabularies "
                                   "with tools/fetch_llama_cpp_test_data.sh)");
    return v;
  }
  absl::StatusOr<std::unique_ptr<worker::loader::GgufFile>> f = worker::loader::GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (f.ok()) v.gguf = std::move(*f);
  absl::StatusOr<std::vector<Golden>> goldens = engine::testing::ReadLlamaCppGoldens(path);
  if (!goldens.ok()) {
    v.missing = std::string(goldens.status().message());
  } else {
    v.goldens = std::move(*goldens);
  }
  return v;
}

// Texts beyond the goldens, with every added token of the vocabulary
// written inside text (up to a bound).
std::vector<std::string> ExtraTexts(const std::vector<std::string>& added) {
  std::vector<std::string> texts = {
      "",
      "Hello world",
      "\n\n\n\n\n\n\n\nx\n\n\n y\n",
      "   three leading spaces and trailing   ",
      "tab\tand\r\nCRLF",
      "\x01\x02\x7f control bytes",
      "digits 1234567890 12.5 and ٣٤ ",
      "e\xCC\x81 n\xCC\x83 \xE0\xA4\x95\xE0\xA5\x8D\xE0\xA4\xB7",  // Combining marks.
      "\xF0\x9F\xA6\x99 \xF0\x9D\x95\xB3 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
  };
  std::string with_added;
  for (size_t i = 0; i < added.size() && i < 300; ++i) {
    absl::StrAppend(&with_added, "a", added[i], " b ");
  }
  texts.push_back(with_added);
  if (!added.empty()) texts.push_back(added.front());
  return texts;
}

// One vocabulary's cases.json for tests/clients/hf_tokenizer_parity_check.py:
// {"encode": [{"text", "ids", "ids_special"}], "decode": [{"ids", "text",
// "text_skip"}]} (decode empty for a tokenizer without Decode).
struct Cases {
  std::string encode = "[";
  std::string decode = "[";

  void AddEncode(const std::string& text, const std::vector<int32_t>& ids,
                 const std::vector<int32_t>& ids_special) {
    absl::StrAppend(&encode, encode.size() > 1 ? "," : "", "{\"text\":", json::QuoteJsonString(text),
                    ",\"ids\":", IdsJson(ids), ",\"ids_special\":", IdsJson(ids_special), "}");
  }
  void AddDecode(const std::vector<int32_t>& ids, const std::string& text,
                 const std::string& text_skip) {
    absl::StrAppend(&decode, decode.size() > 1 ? "," : "", "{\"ids\":", IdsJson(ids),
                    ",\"text\":", json::QuoteJsonString(text),
                    ",\"text_skip\":", json::QuoteJsonString(text_skip), "}");
  }
  std::string Json() const { return absl::StrCat("{\"encode\":", encode, "],\"decode\":", decode, "]}"); }
};

// Runs the Python check on `dir` (tokenizer.json, tokenizer_config.json,
// cases.json) and expects it to pass.
void ExpectPythonTokenizersAgree(const std::string& name, const std::string& dir) {
  absl::StatusOr<tests::util::CommandResult> run =
      tests::util::RunPython("tests/clients/hf_tokenizer_parity_check.py", {"--dir", dir, "--name", name});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  std::printf("%s", run->output.c_str());
}

absl::StatusOr<json::JsonValue> ParseEntry(const std::vector<ZipEntry>& files, const char* name) {
  for (const ZipEntry& f : files) {
    if (f.name == name) return json::ParseJson(f.data);
  }
  return absl::NotFoundError(absl::StrCat("no ", name));
}

// The BPE vocabularies Rill's tokenizer supports (engine:tokenizer_vocab_parity_test).
class HfTokenizerFilesVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizerFilesVocabTest, HfTokenizersAndRillReaderMatchRill) {
  const std::string name = GetParam();
  VocabFiles v = OpenVocab(name);
  if (!v.missing.empty()) GTEST_SKIP() << "skipped " << name << ": " << v.missing;
  ASSERT_NE(v.gguf, nullptr);
  absl::StatusOr<tokenizer::TokenizerSpec> spec = TokenizerSpecFromGguf(*v.gguf);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> rill = tokenizer::BpeTokenizer::Create(*spec);
  ASSERT_TRUE(rill.ok()) << rill.status();
  absl::StatusOr<std::vector<ZipEntry>> files = HfTokenizerFilesFromSpec(*spec, kMaxModelLen);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string dir = TestDir(name);
  for (const ZipEntry& f : *files) WriteFile(dir + "/" + f.name, f.data);

  // Rill's tokenizer.json reader: the same spec back.
  absl::StatusOr<json::JsonValue> tok_json = ParseEntry(*files, "tokenizer.json");
  absl::StatusOr<json::JsonValue> config_json = ParseEntry(*files, "tokenizer_config.json");
  ASSERT_TRUE(tok_json.ok()) << tok_json.status();
  ASSERT_TRUE(config_json.ok()) << config_json.status();
  absl::StatusOr<tokenizer::TokenizerSpec> back = tokenizer::TokenizerSpecFromJson(*tok_json, &*config_json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->chat_template, spec->chat_template);
  // Named templates (command-r's tool_use, rag) travel as transformers'
  // list of {name, template}.
  EXPECT_EQ(back->named_chat_templates, spec->named_chat_templates);
  if (name == "command-r") EXPECT_EQ(spec->named_chat_templates.size(), 2u);
  EXPECT_EQ(back->add_bos, spec->add_bos);
  EXPECT_EQ(back->bos_id, spec->bos_id);
  EXPECT_EQ(back->eos_id, spec->eos_id);
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> reread = tokenizer::BpeTokenizer::Create(*back);
  ASSERT_TRUE(reread.ok()) << reread.status();

  std::vector<std::string> texts;
  for (const Golden& g : v.goldens) texts.push_back(g.text);
  std::vector<std::string> added;
  for (size_t id = 0; id < spec->token_types.size(); ++id) {
    const auto type = static_cast<tokenizer::TokenType>(spec->token_types[id]);
    if (type == tokenizer::TokenType::kControl || type == tokenizer::TokenType::kUserDefined ||
        type == tokenizer::TokenType::kUnknown) {
      added.push_back(spec->tokens[id]);
    }
  }
  for (std::string& t : ExtraTexts(added)) texts.push_back(std::move(t));

  Cases cases;
  auto add_decode = [&](const std::vector<int32_t>& ids) {
    absl::StatusOr<std::string> text = (*rill)->Decode(ids, false);
    absl::StatusOr<std::string> skip = (*rill)->Decode(ids, true);
    ASSERT_TRUE(text.ok() && skip.ok());
    cases.AddDecode(ids, *text, *skip);
    EXPECT_EQ(*(*reread)->Decode(ids, false), *text) << name << ": Rill's reader, decode " << IdsJson(ids);
    EXPECT_EQ(*(*reread)->Decode(ids, true), *skip) << name << ": Rill's reader, decode " << IdsJson(ids);
  };
  int reader_mismatches = 0;
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = (*rill)->Encode(text, false);
    const std::vector<int32_t> ids_special = (*rill)->Encode(text, true);
    cases.AddEncode(text, ids, ids_special);
    const bool same = (*reread)->Encode(text, false) == ids && (*reread)->Encode(text, true) == ids_special;
    EXPECT_TRUE(same) << name << ": Rill's reader encodes '" << text << "' otherwise";
    reader_mismatches += !same;
    add_decode(ids_special);
  }
  // Random id sequences, invalid UTF-8 included: byte-level vocabularies
  // make one U+FFFD per maximal invalid subpart, SentencePiece byte-fallback
  // runs one per byte unless the run is valid (HF's ByteFallback decoder).
  std::mt19937_64 rng = tests::util::TestRng(std::hash<std::string>()(name));
  std::uniform_int_distribution<int32_t> any_id(0, (*rill)->vocab_size() - 1);
  int random_decodes = 0, invalid_utf8 = 0;
  for (int n = 0; n < 100; ++n) {
    std::vector<int32_t> ids(1 + n % 12);
    for (int32_t& id : ids) id = any_id(rng);
    std::string bytes;
    for (int32_t id : ids) (*rill)->AppendTokenBytes(id, false, &bytes);
    invalid_utf8 += !tokenizer::IsValidUtf8(bytes);
    add_decode(ids);
    ++random_decodes;
  }
  // Runs of byte tokens, which random ids over a large vocabulary rarely hit.
  std::vector<int32_t> byte_ids;
  for (int32_t id = 0; id < (*rill)->vocab_size(); ++id) {
    if ((*rill)->FallbackByte(id) >= 0) byte_ids.push_back(id);
  }
  if (!byte_ids.empty()) {
    std::uniform_int_distribution<size_t> any_byte(0, byte_ids.size() - 1);
    for (int n = 0; n < 50; ++n) {
      std::vector<int32_t> ids;
      for (int k = 0; k < 1 + n % 6; ++k) ids.push_back(byte_ids[any_byte(rng)]);
      if (n % 3 == 0) ids.push_back(any_id(rng));
      add_decode(ids);
      ++random_decodes;
    }
  }
  WriteFile(dir + "/cases.json", cases.Json());
  std::printf("%s: %zu texts (%zu goldens), %d random decodes (%d of invalid UTF-8, %zu byte tokens); "
              "Rill's reader: %zu/%zu texts agree\n",
              name.c_str(), texts.size(), v.goldens.size(), random_decodes, invalid_utf8, byte_ids.size(),
              texts.size() - reader_mismatches, texts.size());
  ExpectPythonTokenizersAgree(name, dir);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, HfTokenizerFilesVocabTest,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "qwen35",
                                           "gpt-2", "mpt", "starcoder", "refact", "command-r",
                                           "gemma-4"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return engine::testing::GtestName(info.param);
                         });

// bert-bge (WordPiece): ids only, since Rill's WordPiece tokenizer (encoders)
// has no Decode.
TEST(HfTokenizerFilesWordPieceTest, BertBgeMatchesRill) {
  VocabFiles v = OpenVocab("bert-bge");
  if (!v.missing.empty()) GTEST_SKIP() << "skipped bert-bge: " << v.missing;
  ASSERT_NE(v.gguf, nullptr);
  absl::StatusOr<tokenizer::WordPieceSpec> spec = WordPieceSpecFromGguf(*v.gguf);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> rill =
      tokenizer::WordPieceTokenizer::FromSpec(*spec);
  ASSERT_TRUE(rill.ok()) << rill.status();
  absl::StatusOr<std::vector<ZipEntry>> files = HfTokenizerFilesFromWordPieceSpec(*spec, kMaxModelLen);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string dir = TestDir("bert-bge");
  for (const ZipEntry& f : *files) WriteFile(dir + "/" + f.name, f.data);
  absl::StatusOr<json::JsonValue> tok_json = ParseEntry(*files, "tokenizer.json");
  ASSERT_TRUE(tok_json.ok()) << tok_json.status();
  absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> reread =
      tokenizer::WordPieceTokenizer::FromJson(*tok_json);
  ASSERT_TRUE(reread.ok()) << reread.status();

  std::vector<std::string> texts;
  for (const Golden& g : v.goldens) texts.push_back(g.text);
  std::vector<std::string> added;
  for (int32_t id : spec->special_ids) added.push_back(spec->tokens[id]);
  for (std::string& t : ExtraTexts(added)) texts.push_back(std::move(t));
  Cases cases;
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = (*rill)->Encode(text, false);
    const std::vector<int32_t> ids_special = (*rill)->Encode(text, true);
    cases.AddEncode(text, ids, ids_special);
    EXPECT_EQ((*reread)->Encode(text, false), ids) << "Rill's reader: '" << text << "'";
    EXPECT_EQ((*reread)->Encode(text, true), ids_special) << "Rill's reader: '" << text << "'";
  }
  WriteFile(dir + "/cases.json", cases.Json());
  ExpectPythonTokenizersAgree("bert-bge", dir);
}

// A pre-tokenizer Rill does not implement is refused by name.
TEST(HfTokenizerFilesRefusalTest, UnknownPreTokenizerIsNamed) {
  tokenizer::TokenizerSpec spec;
  spec.tokens = {"a", "b", "ab"};
  spec.merges = {"a b"};
  spec.pre = "deepseek-llm";
  absl::StatusOr<std::vector<ZipEntry>> files = HfTokenizerFilesFromSpec(spec, kMaxModelLen);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(files.status().message().find("'deepseek-llm'"), std::string::npos) << files.status();
  spec.model = "t5";
  files = HfTokenizerFilesFromSpec(spec, kMaxModelLen);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(files.status().message().find("'t5'"), std::string::npos) << files.status();
  // SentencePiece BPE without merges needs scores to order them.
  spec.model = "llama";
  spec.merges.clear();
  files = HfTokenizerFilesFromSpec(spec, kMaxModelLen);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kUnimplemented) << files.status();
}

}  // namespace
}  // namespace rill::engine::service
