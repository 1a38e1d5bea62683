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
// Greedy and top-k select with the SIMD kernels of kernels/top_logits.h.
// With top-k off, top-p's normalizer is the whole vocabulary's softmax
// denominator (kernels/softmax_denominator.h: one vectorized pass, summed
// in an order the ids fix), and the candidates are the logits within a few
// nats of the largest (LogitsAbove, at most kFewCandidates of them,
// sorted) when the truncations stop within them (as they do for a model's
// usual, peaked logits), else the whole vocabulary radix-sorted
// (kernels/sort_logits.h). Every way is exact: the order of
// a sort by logit, ties to the smaller id, so top-p, min-p and the draw
// walk the candidates in that order, and which way was taken changes no
// draw. Every probability weight is ExpOfNonPositive(logit - max)
// (softmax_denominator.h), the same bits on every CPU. NaN logits are
// never drawn; a +inf logit (or, when every logit is -inf, the first) is
// drawn as greedy would pick it (the softmax's limit). An empty
// vocabulary gives 0.
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
  // Both at once, the softmax's denominator taken once: *logprob =
  // Logprob(logits, token), and top[0, returned) = TopLogprobs(logits, n)
  // (the same values; `top` holds n entries).
  int Logprobs(std::span<const float> logits, int32_t token, int n, float* logprob,
               std::pair<int32_t, float>* top);

 private:
  std::vector<float> penalized_;           // logits after penalty and bias
  std::vector<TopLogit> top_;              // the candidates, best first; vocab_size entries
  std::vector<uint64_t> sort_scratch_;     // SortLogits' keys; 2 * vocab_size

  // With top-k off, the logits within kFirstDepth nats of the largest
  // (then twice and four times that) are tried first while there are at
  // most kFewCandidates of them; the whole vocabulary is sorted only when
  // top-p and min-p keep all of them.
  static constexpr int kFewCandidates = 1024;
  static constexpr float kFirstDepth = 8.0f;

  // The plain softmax of `logits`, for log-probabilities: log of its
  // partition function, max + log(sum e^(x - max)), when the largest logit
  // is finite. When it is +inf the logits at +inf share all the mass; when
  // every logit is -inf the mass is uniform. LogprobOf never gives NaN.
  struct Partition {
    float max_logit;
    float log_z;    // finite max only
    int at_max;     // logits equal to max_logit
    int vocab;
    float LogprobOf(float logit) const;
  };
  static Partition SoftmaxPartition(std::span<const float> logits);
  // The top-p weight of a candidate: e^(logit - max_logit) in double.
  static double Weight(float logit, float max_logit);
  // How many of the candidates c (best first) top-p (normalizer `total`)
  // and then min-p keep; *open is true when they keep all of c and might
  // keep more were there more (so c must be the whole vocabulary).
  static size_t Truncate(const SamplingParams& params, std::span<const TopLogit> c, float max_logit,
                         double total, bool* open);
  // With top-k off: the candidates, best first (in top_), and in *n how
  // many the truncations keep.
  std::span<TopLogit> Candidates(const SamplingParams& params, const float* l, int vocab, float max_logit,
                                 double total, size_t* n);
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_SAMPLER_H_
