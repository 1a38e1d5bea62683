// Sampler: picks a sequence's next token from its logits.
//
// Pipeline (the order llama.cpp uses): repetition penalty over the last
// `repetition_last_n` tokens -> if temperature == 0, argmax (greedy) ->
// top-k -> top-p (nucleus) -> min-p -> temperature -> draw from the
// softmax with the sequence's own RNG.
//
// The RNG state is part of the sequence (SequenceRng is a plain value), so
// a fork can be given its own seed and a restored sequence continues with
// exactly the draws the uninterrupted one would have made.
//
// Greedy and top-k select with the SIMD kernels of kernels/top_logits.h;
// with top-k off, the whole vocabulary is radix-sorted
// (kernels/sort_logits.h). Both are exact: the order of a sort by logit,
// ties to the smaller id, so top-p, min-p and the draw walk the candidates
// in that order. NaN logits are never drawn.
//
// Ownership: a Sampler owns scratch sized to the vocabulary so sampling
// allocates nothing; one Sampler per thread that samples.
#ifndef KVSESSION_MODEL_SAMPLER_H_
#define KVSESSION_MODEL_SAMPLER_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/top_logits.h"

namespace kvs {

struct SamplingParams {
  float temperature = 0.8f;         // 0: greedy
  int top_k = 40;                   // 0: off
  float top_p = 0.95f;              // 1: off
  float min_p = 0.05f;              // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  int repetition_last_n = 64;       // tokens the penalty looks back at; -1: all
  uint64_t seed = 0;
  // Added to these tokens' logits first (after the repetition penalty),
  // sorted by id, each id once. At most kMaxLogitBias entries, values in
  // [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;

  static constexpr int kMaxLogitBias = 64;
  static constexpr float kMaxLogitBiasValue = 100.0f;

  // InvalidArgument naming the parameter and its allowed range.
  absl::Status Validate() const;
  // Validate(), and every logit_bias id in [0, vocab_size).
  absl::Status ValidateFor(int vocab_size) const;
  bool greedy() const { return temperature == 0.0f; }
};

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
class SequenceRng {
 public:
  SequenceRng() : SequenceRng(0) {}
  explicit SequenceRng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // [0, 1) with 53 random bits

  const std::array<uint64_t, 4>& state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) { s_ = s; }
  bool operator==(const SequenceRng&) const = default;

 private:
  std::array<uint64_t, 4> s_;
};

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  // `recent` is the sequence so far (the penalty reads its tail). Draws one
  // number from `rng` unless the params are greedy.
  int32_t Sample(const SamplingParams& params, std::span<const float> logits,
                 std::span<const int32_t> recent, SequenceRng* rng);

  // The n most likely tokens and their log-probabilities under the plain
  // softmax of `logits` (what "logprobs" report), most likely first.
  void TopLogprobs(std::span<const float> logits, int n,
                   std::vector<std::pair<int32_t, float>>* out);
  // Log-probability of `token` under the plain softmax of `logits`.
  static float Logprob(std::span<const float> logits, int32_t token);

 private:
  std::vector<float> penalized_;           // logits after penalty and bias
  std::vector<TopLogit> top_;              // the candidates, best first; vocab_size entries
  std::vector<uint64_t> sort_scratch_;     // SortLogits' keys; 2 * vocab_size
  std::vector<double> weights_;            // exp(logit - max) per candidate, for top-p
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_SAMPLER_H_
