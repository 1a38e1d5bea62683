// The pre-tokenizer's matching work grows linearly with its input, for
// every family and for the inputs that made published patterns backtrack
// (model/pretokenizer.h). Work is counted in matcher steps, not timed, so
// these tests give the same answer on any machine, under any load and
// under the sanitizers.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/pretokenizer.h"
#include "model/tokenizer_sample_texts.h"

namespace kvs {
namespace {

constexpr PreTokenizerKind kEveryKind[] = {
    PreTokenizerKind::kDefault,      PreTokenizerKind::kGpt2,   PreTokenizerKind::kLlama3,
    PreTokenizerKind::kQwen2,        PreTokenizerKind::kDeepseekLlm,
    PreTokenizerKind::kDeepseekCoder, PreTokenizerKind::kFalcon, PreTokenizerKind::kStarcoder};

using sample_texts::RunInput;

struct SplitWork {
  std::vector<std::string_view> pieces;
  uint64_t matcher_steps = 0;
};

SplitWork Split(const PreTokenizer& pre_tokenizer, std::string_view text) {
  SplitWork work;
  work.pieces = pre_tokenizer.Split(text, &work.matcher_steps);
  return work;
}

// The ratio of the steps of splitting `long_text` to those of `short_text`.
double StepRatio(const PreTokenizer& counting, const std::string& short_text,
                 const std::string& long_text, uint64_t* short_steps) {
  *short_steps = Split(counting, short_text).matcher_steps;
  const uint64_t long_steps = Split(counting, long_text).matcher_steps;
  return static_cast<double>(long_steps) / static_cast<double>(std::max<uint64_t>(*short_steps, 1));
}

constexpr size_t kShort = 4'000;
constexpr size_t kLong = 4 * kShort;

TEST(PreTokenizerWork, SplittingFourTimesTheInputTakesAboutFourTimesTheMatcherSteps) {
  // Linear work gives a ratio near 4 (a little under where a split has
  // costs that do not grow with the input); work quadratic in a run gives
  // near 16.
  constexpr double kLeastLinearRatio = 3.0;
  constexpr double kMostLinearRatio = 4.5;
  for (PreTokenizerKind kind : kEveryKind) {
    absl::StatusOr<PreTokenizer> counting = PreTokenizer::CreateCountingMatcherSteps(kind);
    ASSERT_TRUE(counting.ok()) << counting.status();
    for (const RunInput& input : sample_texts::HostileRuns()) {
      const std::string context =
          absl::StrCat("kind ", static_cast<int>(kind), ", ", input.name);
      uint64_t short_steps = 0;
      const double ratio =
          StepRatio(*counting, input.Build(kShort), input.Build(kLong), &short_steps);
      ASSERT_GT(short_steps, 0u) << context;
      EXPECT_LE(ratio, kMostLinearRatio) << context << ": " << short_steps << " steps, then x" << ratio;
      EXPECT_GE(ratio, kLeastLinearRatio) << context << ": " << short_steps << " steps, then x" << ratio;
    }
  }
}

// The count sees work quadratic in a run: DeepSeek-LLM's published `\s+$`
// (each start inside a run backtracks through the rest of it), and a
// possessive repeat that swallows the rest of the run from each start
// (calling out once for it) before failing.
TEST(PreTokenizerWork, PatternsThatRescanARunFromEveryStartShowAboutSixteenTimesTheSteps) {
  const RunInput spaces_then_digit = {"spaces then a digit", " ", "1"};
  for (const char* pattern : {R"(\s+$)", R"(\s++\z)"}) {
    absl::StatusOr<PreTokenizer> counting =
        PreTokenizer::CreateCountingMatcherStepsOfPatterns({pattern});
    ASSERT_TRUE(counting.ok()) << counting.status();
    uint64_t short_steps = 0;
    // (Shorter runs than above: the quadratic work is real.)
    const double ratio = StepRatio(*counting, spaces_then_digit.Build(kShort / 4),
                                   spaces_then_digit.Build(kLong / 4), &short_steps);
    EXPECT_GT(ratio, 12.0) << pattern << ": " << short_steps << " steps, then x" << ratio;
  }
}

TEST(PreTokenizerWork, ACountingPreTokenizerSplitsExactlyAsThePlainOne) {
  std::vector<std::string> texts = {
      "Hello, y'all! 12345 \xE6\x88\x91 \xF0\x9F\xA6\x99  \n x",
      "  leading and trailing  \t\n",
      "I'LL 've 's\r\n\r\nnumbers 1234567 and \xE2\x82\xAC" "5",
  };
  for (const RunInput& input : sample_texts::HostileRuns()) texts.push_back(input.Build(300));
  for (PreTokenizerKind kind : kEveryKind) {
    absl::StatusOr<PreTokenizer> plain = PreTokenizer::Create(kind);
    absl::StatusOr<PreTokenizer> counting = PreTokenizer::CreateCountingMatcherSteps(kind);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(counting.ok()) << counting.status();
    for (const std::string& text : texts) {
      uint64_t plain_steps = 0;
      EXPECT_EQ(plain->Split(text, &plain_steps), Split(*counting, text).pieces)
          << "kind " << static_cast<int>(kind);
      EXPECT_EQ(plain_steps, 0u) << "a plain pre-tokenizer counts nothing";
    }
  }
}

TEST(PreTokenizerWork, StepsAddUpOverCalls) {
  absl::StatusOr<PreTokenizer> counting =
      PreTokenizer::CreateCountingMatcherSteps(PreTokenizerKind::kGpt2);
  ASSERT_TRUE(counting.ok()) << counting.status();
  const uint64_t once = Split(*counting, "Hello world").matcher_steps;
  uint64_t total = 1000;
  counting->Split("Hello world", &total);
  counting->Split("Hello world", &total);
  EXPECT_EQ(total, 1000 + 2 * once);
}

}  // namespace
}  // namespace kvs
