// The `kvsession` binary's local commands, run as a user runs them.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/reference_data.h"
#include "tests/scratch_dir.h"
#include "tests/subprocess.h"

namespace kvs {
namespace {

using ::testing::HasSubstr;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(SharedDir() + "/models")) GTEST_SKIP() << "../shared not present";
  }

  ProcessResult Kvsession(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("kvsession"));
    return RunProcess(args, tmp_.string());
  }
  std::string Model(const std::string& name) { return SharedDir() + "/models/" + name; }

  ScratchDir scratch_{"cli_test"};
  const std::filesystem::path tmp_ = scratch_.path();
};

TEST_F(CliTest, GreedyRunReproducesLlamaCppOnAidreams) {
  for (const ReferenceLine& line : LoadReference(SharedDir() + "/reference/aidreams260K.jsonl")) {
    for (const char* kv : {"f16", "f32"}) {
      ProcessResult r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--prompt", line.prompt,
                                   "-n", std::to_string(line.greedy_ids.size()), "--temp", "0",
                                   "--kv-type", kv, "--json"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      nlohmann::json j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), line.prompt_ids) << line.prompt;
      EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), line.greedy_ids) << line.prompt << " kv " << kv;
      EXPECT_EQ(j["text"].get<std::string>(), line.greedy_text);
      EXPECT_EQ(j["finish_reason"], "length");
      for (const char* t : {"load_ms", "prefill_ms", "decode_ms", "prefill_tok_s", "decode_tok_s"}) {
        EXPECT_TRUE(j["timings"].contains(t)) << t;
      }
      EXPECT_THAT(r.err, HasSubstr("loaded ")) << "one progress line about the model load";
    }
  }
}

TEST_F(CliTest, StreamingOutputIsTheGeneratedText) {
  ProcessResult r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--prompt", "I was flying",
                               "-n", "48", "--temp", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ref = LoadReference(SharedDir() + "/reference/aidreams260K.jsonl");
  EXPECT_EQ(r.out, ref[0].greedy_text + "\n");
}

TEST_F(CliTest, SeededSamplingIsReproducibleAndSeedsDiffer) {
  auto sample = [&](const std::string& seed) {
    ProcessResult r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--prompt", "Once upon",
                                 "-n", "24", "--temp", "1.0", "--seed", seed, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["ids"].get<std::vector<int32_t>>();
  };
  EXPECT_EQ(sample("11"), sample("11"));
  EXPECT_NE(sample("11"), sample("12"));
}

TEST_F(CliTest, TokenizeWorksOnVocabularyOnlyFiles) {
  ProcessResult r = Kvsession({"tokenize", "--model", SharedDir() + "/vocab/ggml-vocab-gpt-2.gguf",
                               "--text", "Hello world", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Line 11 of the .out file holds "Hello world" (see the .inp file).
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"].get<std::vector<int32_t>>(),
            (std::vector<int32_t>{15496, 995}));
  r = Kvsession({"tokenize", "--model", Model("tiny-llama-gqa.gguf"), "--text", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 9038 2501 263 931\n");
}

// `render` on the vocabulary-only Qwen3 GGUF reproduces a conversation
// Hugging Face rendered (../shared/chat), text and ids, in both modes.
TEST_F(CliTest, RenderReproducesHuggingFaceChatTemplates) {
  const std::string chat = SharedDir() + "/chat/qwen3.jsonl";
  if (!std::filesystem::exists(chat)) GTEST_SKIP() << chat << " absent";
  std::ifstream in(chat);
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json conversation = nlohmann::json::parse(line);
    if (conversation["name"] != "thinking-history") continue;
    const std::string messages = (tmp_ / "messages.json").string();
    std::ofstream(messages) << conversation["messages"].dump();
    std::vector<std::string> args = {"render", "--model",
                                     SharedDir() + "/vocab/ggml-vocab-qwen3.gguf", "--messages",
                                     messages, "--json"};
    if (!conversation["add_generation_prompt"].get<bool>()) args.push_back("--no-generation-prompt");
    if (!conversation.value("enable_thinking", true)) args.push_back("--no-thinking");
    ProcessResult r = Kvsession(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out["text"], conversation["text"]) << line;
    EXPECT_EQ(out["ids"], conversation["ids"]) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

TEST_F(CliTest, RenderErrorsAreClear) {
  const std::string messages = (tmp_ / "messages.json").string();
  std::ofstream(messages) << R"([{"role": "user", "content": "Hi"}])";
  // gpt-2's vocabulary has no chat template; naming one works.
  const std::string gpt2 = SharedDir() + "/vocab/ggml-vocab-gpt-2.gguf";
  ProcessResult r = Kvsession({"render", "--model", gpt2, "--messages", messages});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("supported families: chatml, qwen3"));
  r = Kvsession({"render", "--model", gpt2, "--messages", messages, "--chat-template", "chatml",
                 "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["text"],
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  r = Kvsession({"render", "--model", gpt2, "--messages", messages, "--chat-template", "nope"});
  EXPECT_EQ(r.exit_code, 2);
  std::ofstream(messages) << R"({"role": "user"})";
  r = Kvsession({"render", "--model", gpt2, "--messages", messages, "--chat-template", "chatml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("expected a JSON array"));
}

TEST_F(CliTest, PromptLongerThanTheContextIsAClearError) {
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "the machine dreamed of vectors ";
  ProcessResult r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--prompt", prompt, "-n", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("context length is 128 tokens"));
}

TEST_F(CliTest, BadModelFilesAndFlagsAreClearErrors) {
  const std::string bad = (tmp_ / "broken.gguf").string();
  std::filesystem::copy_file(Model("aidreams260K.gguf"), bad);
  std::filesystem::resize_file(bad, 5000);
  ProcessResult r = Kvsession({"run", "--model", bad, "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("broken.gguf"));
  r = Kvsession({"run", "--model", (tmp_ / "absent.gguf").string(), "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("absent.gguf"));
  r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--top-p", "7"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("top_p"));
  r = Kvsession({"run", "--model", Model("aidreams260K.gguf"), "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown flag '--bogus'"));
}

TEST_F(CliTest, AnEmptyConnectionFlagIsAnErrorRatherThanAPlaintextConnection) {
  // `--tls-ca "$CA"` with CA unset: taken as absent, the call would go out
  // in plaintext with the API key.
  for (const char* flag : {"--tls-ca", "--tls-cert", "--tls-key", "--api-key", "--server"}) {
    ProcessResult r = Kvsession({"ls", "--server", "127.0.0.1:1", flag, ""});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr(std::string(flag) + " was given an empty value"));
  }
  ProcessResult r = Kvsession({"ls", "--server", "127.0.0.1:1", "--tls-ca="});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls-ca was given an empty value"));
}

// `kvsession --server A ls` as git's and kubectl's global flags go: the
// address given first is the one the command dials.
TEST_F(CliTest, ConnectionFlagsAndJsonMayComeBeforeTheCommand) {
  ProcessResult r = Kvsession({"--server", "127.0.0.1:1", "ls"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:1"));
  r = Kvsession({"--server=127.0.0.1:2", "--json", "info"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:2"));
  r = Kvsession({"--tls-ca", "", "ls"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls-ca was given an empty value")) << "checked as after the command";
  r = Kvsession({"--model", Model("aidreams260K.gguf"), "run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("give --model after it"));
  r = Kvsession({"--server"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--server needs a value"));
  // A flag of the command left without its value (`--session $S`, S
  // empty) must not take a moved flag as its value, dropping --tls.
  r = Kvsession({"--tls", "--server", "127.0.0.1:1", "rm", "--session"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--session needs a value"));
  // The command's own flags come after the moved ones: the later wins.
  r = Kvsession({"--server", "127.0.0.1:1", "ls", "--server", "127.0.0.1:3"});
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:3"));
}

}  // namespace
}  // namespace kvs
