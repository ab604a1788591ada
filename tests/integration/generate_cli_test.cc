// `rill generate` as users run it, on a tiny random model: its greedy
// tokens and text are the in-process engine's for the same prompt (plain,
// --chat through the model's chat template, --ignore_eos), --print_ids
// prints exactly the generated ids, and bad flags end with exit code 1 and a
// one-line reason instead of a crash.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"
#include "tests/util/tiny_models.h"
#include "tokenizer/tokenizer.h"

namespace rill::tests::integration {
namespace {

using util::CommandResult;
using util::ShellQuote;

// What `rill generate --print_ids` printed: the text line(s), then the ids.
struct CliRun {
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
  std::string text;  // stdout before the ids line, without its newline.
  std::vector<int32_t> ids;
};

// The ChatML template (rendered by tokenizer/chat_template.h).
constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' "
    "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class GenerateCliTest : public util::TinyModels<::testing::Test> {
 protected:
  // Untied input and output embeddings: random weights then give varied
  // tokens (the tied llama_gqa tends to repeat one token).
  static std::string GgufModel() { return dir_ + "/llama_llama3/model.f32.gguf"; }

  // `rill generate` with `flags` (greedy, 2 threads, ids printed), stdout
  // and stderr kept apart.
  static CliRun RunGenerate(const std::vector<std::string>& flags) {
    const std::string err = util::TestTempDir() + "/generate_stderr.txt";
    // In braces: RunCommand sends the command's stderr to stdout, the
    // group's own redirection keeps it apart.
    std::string cmd = "{ " + ShellQuote(util::RunfilePath("cli/rill")) + " generate --threads=2";
    for (const std::string& f : flags) absl::StrAppend(&cmd, " ", ShellQuote(f));
    absl::StrAppend(&cmd, " 2>", ShellQuote(err), "; }");
    CommandResult r = util::RunCommand(cmd);
    CliRun run;
    run.exit_code = r.exit_code;
    run.stdout_text = r.output;
    run.stderr_text = ReadFile(err);
    std::string out = r.output;
    if (!out.empty() && out.back() == '\n') out.pop_back();
    const size_t last = out.rfind('\n');
    run.text = last == std::string::npos ? "" : out.substr(0, last);
    for (absl::string_view id :
         absl::StrSplit(last == std::string::npos ? out : out.substr(last + 1), ',',
                        absl::SkipEmpty())) {
      int32_t v = -1;
      EXPECT_TRUE(absl::SimpleAtoi(id, &v)) << "not an id: '" << id << "' in " << r.output;
      run.ids.push_back(v);
    }
    return run;
  }

  // The engine's greedy completion of `prompt` on `model` (same threads and
  // matmul as the CLI's defaults).
  static engine::CompletionOutput EngineGreedy(const std::string& model,
                                               const engine::Prompt& prompt, int max_tokens,
                                               bool ignore_eos = false) {
    engine::EngineArgs args;
    args.model = model;
    args.threads = 2;
    args.matmul = "exact";
    args.num_kv_blocks = 64;  // The whole 128-token context, not 512 MiB.
    absl::StatusOr<std::unique_ptr<engine::AsyncLLMEngine>> eng =
        engine::CreateAsyncLLMEngine(args);
    EXPECT_TRUE(eng.ok()) << eng.status();
    if (!eng.ok()) return {};
    engine::SamplingParams params;
    params.temperature = 0.0f;
    params.max_tokens = max_tokens;
    params.ignore_eos = ignore_eos;
    params.output_kind = engine::OutputKind::kFinalOnly;
    absl::StatusOr<std::shared_ptr<engine::RequestOutputStream>> stream =
        (*eng)->Generate(prompt, params, "reference");
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return {};
    absl::StatusOr<engine::RequestOutput> out = (*stream)->Next();
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok() || out->outputs.empty()) return {};
    EXPECT_TRUE(out->finished);
    return out->outputs[0];
  }
};

TEST_F(GenerateCliTest, GreedyOutputIsTheEnginesAndPrintIdsListsTheTokens) {
  const std::string prompt = "the cat sat on the mat and then";
  CliRun run = RunGenerate(
      {"--model=" + GgufModel(), "--prompt=" + prompt, "--max_tokens=24", "--print_ids"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  const engine::CompletionOutput want = EngineGreedy(GgufModel(), prompt, 24);
  ASSERT_FALSE(want.token_ids.empty());
  EXPECT_EQ(run.ids, want.token_ids);
  EXPECT_EQ(run.text, want.text);
  // The timing line on stderr counts the same tokens.
  EXPECT_NE(run.stderr_text.find(absl::StrCat(run.ids.size(), " tokens, ")), std::string::npos)
      << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("tokens/s decode]"), std::string::npos) << run.stderr_text;
}

TEST_F(GenerateCliTest, WithoutPrintIdsStdoutIsTheTextAlone) {
  const std::string prompt = "in the morning";
  CliRun with_ids =
      RunGenerate({"--model=" + GgufModel(), "--prompt=" + prompt, "--max_tokens=16",
                   "--print_ids"});
  CommandResult plain = util::RunCommand("{ " + ShellQuote(util::RunfilePath("cli/rill")) +
                                         " generate --threads=2 --max_tokens=16 " +
                                         ShellQuote("--model=" + GgufModel()) + " " +
                                         ShellQuote("--prompt=" + prompt) + " 2>/dev/null; }");
  ASSERT_EQ(with_ids.exit_code, 0) << with_ids.stderr_text;
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output, with_ids.text + "\n");
}

TEST_F(GenerateCliTest, IgnoreEosGeneratesMaxTokens) {
  const std::string prompt = "to be or not to be";
  CliRun run = RunGenerate({"--model=" + GgufModel(), "--prompt=" + prompt, "--max_tokens=40",
                            "--ignore_eos", "--print_ids"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.ids.size(), 40u);
  const engine::CompletionOutput want =
      EngineGreedy(GgufModel(), prompt, 40, /*ignore_eos=*/true);
  EXPECT_EQ(run.ids, want.token_ids);
  EXPECT_EQ(run.text, want.text);
}

TEST_F(GenerateCliTest, ChatRendersTheModelsTemplate) {
  // The HF form of the tiny model with a ChatML template beside it.
  const std::string model = util::TestTempDir() + "/chat_model";
  ASSERT_EQ(util::RunCommand("rm -rf " + ShellQuote(model) + " && cp -r " +
                             ShellQuote(dir_ + "/llama_llama3/hf-f32") + " " + ShellQuote(model))
                .exit_code,
            0);
  {
    std::ofstream config(model + "/tokenizer_config.json");
    config << "{\"chat_template\": \"";
    for (const char c : std::string(kChatMlTemplate)) {
      if (c == '"' || c == '\\') config << '\\';
      config << c;
    }
    config << "\"}";
  }
  CliRun run = RunGenerate(
      {"--model=" + model, "--chat", "--prompt=Hello there", "--max_tokens=16", "--print_ids"});
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok =
      tokenizer::Tokenizer::FromTokenizerJson(model + "/tokenizer.json",
                                              model + "/tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<int32_t> prompt_ids = (*tok)->Encode(
      "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
      /*add_special_tokens=*/false);
  // The stderr line counts the rendered prompt's tokens.
  EXPECT_NE(run.stderr_text.find(absl::StrCat("[", prompt_ids.size(), " prompt tokens")),
            std::string::npos)
      << run.stderr_text;
  const engine::CompletionOutput want = EngineGreedy(model, engine::Prompt(prompt_ids), 16);
  EXPECT_EQ(run.ids, want.token_ids);
  EXPECT_EQ(run.text, want.text);
}

// A failure: exit code 1, "error: <reason>" on stderr, nothing that looks
// like a crash.
void ExpectCleanFailure(const CliRun& run, const std::string& reason) {
  EXPECT_EQ(run.exit_code, 1) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("error: "), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find(reason), std::string::npos) << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("Check failed"), std::string::npos) << run.stderr_text;
  EXPECT_EQ(run.stderr_text.find("SIG"), std::string::npos) << run.stderr_text;
}

TEST_F(GenerateCliTest, ZeroMaxTokensFailsCleanly) {
  ExpectCleanFailure(
      RunGenerate({"--model=" + GgufModel(), "--prompt=hello", "--max_tokens=0"}),
      "max_tokens must be at least 1");
}

TEST_F(GenerateCliTest, PromptLongerThanTheContextFailsCleanly) {
  // The tiny model's context is 128 tokens; every "word " is at least one.
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += "word ";
  ExpectCleanFailure(RunGenerate({"--model=" + GgufModel(), "--prompt=" + prompt}),
                     "exceeds the maximum model length of 128 tokens");
}

TEST_F(GenerateCliTest, ChatWithoutATemplateFailsCleanly) {
  ExpectCleanFailure(RunGenerate({"--model=" + GgufModel(), "--chat", "--prompt=hi"}),
                     "chat template");
}

TEST_F(GenerateCliTest, BadSamplingFlagFailsCleanly) {
  ExpectCleanFailure(
      RunGenerate({"--model=" + GgufModel(), "--prompt=hello", "--top_p=0"}), "top_p");
}

}  // namespace
}  // namespace rill::tests::integration
