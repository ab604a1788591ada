// Rill's tokenizers against llama.cpp's golden tokenizations of real
// vocabularies: the vocab-only ggml-vocab-<name>.gguf files with .inp (texts
// separated by "\n__ggml_vocab_test__\n") and .out (one line of ids per text,
// produced by HF tokenizers with add_special_tokens=False) from the pinned
// llama-cpp-python sdist, which tools/fetch_llama_cpp_test_data.sh extracts into
// $RILL_MODEL_DIR/ggml-vocab. Each vocabulary is loaded through the engine's
// GGUF tokenizer loader; every golden line must match exactly, and
// decode(encode(s)) == s for the lossless (BPE) families. Vocabularies Rill
// does not implement must be refused with an error that names the model or
// pre-tokenizer and lists the supported ones.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "engine/llama_cpp_vocab_goldens.h"
#include "engine/tokenizer_loader.h"
#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "worker/loader/gguf.h"

namespace rill::engine {
namespace {

using testing::Golden;

std::vector<Golden> ReadGoldens(const std::string& gguf) {
  absl::StatusOr<std::vector<Golden>> goldens = testing::ReadLlamaCppGoldens(gguf);
  EXPECT_TRUE(goldens.ok()) << goldens.status();
  return goldens.ok() ? std::move(*goldens) : std::vector<Golden>();
}

std::unique_ptr<worker::loader::GgufFile> OpenVocab(const std::string& name) {
  const std::string path = testing::LlamaCppVocabPath(name);
  absl::StatusOr<std::unique_ptr<worker::loader::GgufFile>> f =
      worker::loader::GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status() << " (run tools/setup.sh, which fetches "
                      << "llama.cpp's vocabularies with tools/fetch_llama_cpp_test_data.sh)";
  return f.ok() ? std::move(*f) : nullptr;
}

using testing::GtestName;

std::string Show(const std::vector<int32_t>& ids) { return absl::StrJoin(ids, " "); }

// BPE vocabularies Rill claims: every golden line is checked, and each is
// lossless: decode(encode(s)) == s for every golden text.
struct Claimed {
  const char* name;
  bool add_bos;   // What the loader must say (llama.cpp's defaults).
};

class BpeVocabTest : public ::testing::TestWithParam<Claimed> {};

TEST_P(BpeVocabTest, MatchesEveryGoldenLine) {
  const Claimed& v = GetParam();
  std::unique_ptr<worker::loader::GgufFile> f = OpenVocab(v.name);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<tokenizer::TokenizerSpec> spec = TokenizerSpecFromGguf(*f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->add_bos, v.add_bos);
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tok =
      tokenizer::BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<Golden> goldens = ReadGoldens(f->path());
  ASSERT_GE(goldens.size(), 40u);
  int mismatches = 0, roundtrips = 0;
  for (const Golden& g : goldens) {
    const std::vector<int32_t> got = (*tok)->Encode(g.text, /*add_special_tokens=*/false);
    EXPECT_EQ(Show(got), Show(g.ids)) << v.name << ": text '" << g.text << "'";
    mismatches += got != g.ids;
    absl::StatusOr<std::string> back = (*tok)->Decode(got, /*skip_special_tokens=*/false);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, g.text) << v.name << ": round trip";
    roundtrips += *back == g.text;
  }
  if (spec->add_bos) {
    const std::vector<int32_t> with_bos = (*tok)->Encode("Hello", /*add_special_tokens=*/true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], spec->bos_id);
  }
  std::cout << v.name << ": " << goldens.size() - mismatches << "/" << goldens.size()
            << " golden lines match, " << roundtrips << " round trips\n";
}

INSTANTIATE_TEST_SUITE_P(
    LlamaCppVocabs, BpeVocabTest,
    ::testing::Values(
        // SentencePiece BPE by score with byte fallback (Llama 2, Mistral).
        Claimed{"llama-spm", true}, Claimed{"phi-3", true},
        // Byte-level BPE, one pre-tokenizer each.
        Claimed{"llama-bpe", true}, Claimed{"qwen2", false},
        Claimed{"qwen35", false}, Claimed{"gpt-2", false},
        Claimed{"mpt", false}, Claimed{"starcoder", false},
        Claimed{"refact", false}, Claimed{"command-r", true},
        // BPE by merge rank over UTF-8 with byte fallback.
        Claimed{"gemma-4", true}),
    [](const ::testing::TestParamInfo<Claimed>& info) { return GtestName(info.param.name); });

// bert-bge (WordPiece; lowercases, so not lossless).
TEST(WordPieceVocabTest, BertBgeMatchesEveryGoldenLine) {
  std::unique_ptr<worker::loader::GgufFile> f = OpenVocab("bert-bge");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<tokenizer::WordPieceSpec> spec = WordPieceSpecFromGguf(*f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> tok =
      tokenizer::WordPieceTokenizer::FromSpec(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<Golden> goldens = ReadGoldens(f->path());
  ASSERT_GE(goldens.size(), 40u);
  int mismatches = 0;
  for (const Golden& g : goldens) {
    const std::vector<int32_t> got = (*tok)->Encode(g.text, /*add_special_tokens=*/false);
    EXPECT_EQ(Show(got), Show(g.ids)) << "bert-bge: text '" << g.text << "'";
    mismatches += got != g.ids;
  }
  // With special tokens: [CLS] ... [SEP], as the engine's Encode sends them.
  EXPECT_EQ(Show((*tok)->Encode("Hello world", true)), "101 7592 2088 102");
  std::cout << "bert-bge: " << goldens.size() - mismatches << "/" << goldens.size()
            << " golden lines match\n";
  // The BPE loader refuses it with a message that says why.
  absl::StatusOr<tokenizer::TokenizerSpec> bpe = TokenizerSpecFromGguf(*f);
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(bpe.status().message(), "'bert'")) << bpe.status();
}

// command-r's GGUF carries named templates (tokenizer.chat_templates lists
// tool_use and rag): the loader keeps them, and a chat request that passes
// tools renders tool_use, as transformers and vLLM pick it; without tools,
// the default one.
TEST(NamedChatTemplatesTest, CommandRToolUseIsRenderedWithTools) {
  std::unique_ptr<worker::loader::GgufFile> f = OpenVocab("command-r");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<tokenizer::TokenizerSpec> spec = TokenizerSpecFromGguf(*f);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->named_chat_templates.size(), 2u);
  for (const char* name : {"tool_use", "rag"}) {
    absl::StatusOr<std::string_view> text = f->GetString(std::string("tokenizer.chat_template.") + name);
    ASSERT_TRUE(text.ok()) << name;
    EXPECT_EQ(spec->named_chat_templates.at(name), *text) << name;
  }
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::FromSpec(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<tokenizer::ChatMessage> messages = {{"user", "What is the weather in Paris?"}};
  // In the form command-r's tool_use template reads (Cohere's).
  absl::StatusOr<base::json::JsonValue> tools = base::json::ParseJson(
      R"([{"name": "get_weather", "description": "Weather now", "parameter_definitions":
          {"city": {"description": "The city", "type": "str", "required": true}}}])");
  ASSERT_TRUE(tools.ok()) << tools.status();
  auto direct = [&](const std::string& source, const tokenizer::ChatTemplateOptions& o) {
    absl::StatusOr<tokenizer::ChatTemplate> t = tokenizer::ChatTemplate::Create(source);
    EXPECT_TRUE(t.ok()) << t.status();
    tokenizer::ChatTemplateOptions with_tokens = o;
    with_tokens.bos_token = (*tok)->bpe().IdToToken((*tok)->bos_id());
    with_tokens.eos_token = (*tok)->bpe().IdToToken((*tok)->eos_id());
    absl::StatusOr<std::string> out = t->Apply(messages, with_tokens);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::string();
  };
  tokenizer::ChatTemplateOptions options;
  options.now = 1767225600;
  absl::StatusOr<std::string> plain = (*tok)->ApplyChatTemplate(messages, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, direct(spec->chat_template, options));
  options.tools = *tools;
  absl::StatusOr<std::string> with_tools = (*tok)->ApplyChatTemplate(messages, options);
  ASSERT_TRUE(with_tools.ok()) << with_tools.status();
  EXPECT_EQ(*with_tools, direct(spec->named_chat_templates.at("tool_use"), options));
  EXPECT_TRUE(absl::StrContains(*with_tools, "get_weather")) << *with_tools;
  EXPECT_NE(*with_tools, direct(spec->chat_template, options));
}

// Vocabularies Rill does not implement: loading must fail and say which
// pre-tokenizer or model it is and what is supported.
struct Refused {
  const char* name;
  const char* names;  // What the error must name.
};

class RefusedVocabTest : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedVocabTest, LoadingFailsNamingWhatIsUnsupported) {
  const Refused& v = GetParam();
  std::unique_ptr<worker::loader::GgufFile> f = OpenVocab(v.name);
  ASSERT_NE(f, nullptr);
  absl::StatusOr<tokenizer::TokenizerSpec> spec = TokenizerSpecFromGguf(*f);
  ASSERT_FALSE(spec.ok()) << v.name << " loaded, so it would be tokenized by other rules";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kUnimplemented);
  const std::string msg(spec.status().message());
  EXPECT_TRUE(absl::StrContains(msg, v.names)) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "supported: ")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, f->path())) << msg;
  std::cout << v.name << ": refused: " << msg << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    LlamaCppVocabs, RefusedVocabTest,
    ::testing::Values(Refused{"falcon", "pre-tokenizer 'falcon'"},
                      Refused{"deepseek-llm", "pre-tokenizer 'deepseek-llm'"},
                      Refused{"deepseek-coder", "pre-tokenizer 'deepseek-coder'"},
                      Refused{"nomic-bert-moe", "tokenizer model 't5'"}),
    [](const ::testing::TestParamInfo<Refused>& info) { return GtestName(info.param.name); });

}  // namespace
}  // namespace rill::engine
