#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/softmax_denominator.h"
#include "kernels/sort_logits.h"

namespace kvs {
namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

bool Finite(float x) { return std::isfinite(x); }

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (!Finite(temperature) || temperature < 0 || temperature > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be in [0, 100] (0 = greedy), got ", temperature));
  }
  if (top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0 (0 = off), got ", top_k));
  if (!Finite(top_p) || top_p <= 0 || top_p > 1) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1] (1 = off), got ", top_p));
  }
  if (!Finite(min_p) || min_p < 0 || min_p > 1) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1] (0 = off), got ", min_p));
  }
  if (!Finite(repetition_penalty) || repetition_penalty <= 0 || repetition_penalty > 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repetition_penalty must be in (0, 10] (1 = off), got ", repetition_penalty));
  }
  if (repetition_last_n < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repetition_last_n must be >= -1 (-1 = whole sequence), got ", repetition_last_n));
  }
  if (logit_bias.size() > static_cast<size_t>(kMaxLogitBias)) {
    return absl::InvalidArgumentError(absl::StrCat("logit_bias has at most ", kMaxLogitBias,
                                                   " entries, got ", logit_bias.size()));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat("logit_bias token id ", id, " is negative"));
    if (!Finite(bias) || bias < -kMaxLogitBiasValue || bias > kMaxLogitBiasValue) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias values must be in [-100, 100], got ",
                                                     bias, " for token ", id));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplingParams::ValidateFor(int vocab_size) const {
  if (absl::Status s = Validate(); !s.ok()) return s;
  for (const auto& [id, bias] : logit_bias) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias token id ", id,
                                                     " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

SequenceRng::SequenceRng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = SplitMix64(&x);
}

uint64_t SequenceRng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double SequenceRng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

Sampler::Sampler(int vocab_size) {
  penalized_.resize(vocab_size);
  top_.resize(vocab_size);
  sort_scratch_.resize(2 * static_cast<size_t>(vocab_size));
}

int32_t Sampler::Sample(const SamplingParams& params, std::span<const float> logits,
                        std::span<const int32_t> recent, SequenceRng* rng) {
  const int vocab = static_cast<int>(logits.size());
  if (vocab <= 0) return 0;
  const float* l = logits.data();
  if (params.repetition_penalty != 1.0f && !recent.empty()) {
    std::copy(logits.begin(), logits.end(), penalized_.begin());
    size_t n = params.repetition_last_n < 0
                   ? recent.size()
                   : std::min(recent.size(), static_cast<size_t>(params.repetition_last_n));
    for (int32_t t : recent.subspan(recent.size() - n)) {
      if (t < 0 || t >= vocab) continue;
      // Penalise each distinct token once: only touch values still equal to the original.
      if (penalized_[t] != logits[t]) continue;
      penalized_[t] = logits[t] > 0 ? logits[t] / params.repetition_penalty
                                    : logits[t] * params.repetition_penalty;
    }
    l = penalized_.data();
  }
  if (!params.logit_bias.empty()) {
    if (l != penalized_.data()) std::copy(logits.begin(), logits.end(), penalized_.begin());
    for (const auto& [t, bias] : params.logit_bias) {
      if (t >= 0 && t < vocab) penalized_[t] += bias;
    }
    l = penalized_.data();
  }

  // Greedy and top-k pick with the SIMD kernels (kernels/top_logits.h):
  // the same tokens, in the same order, as std::max_element and a
  // partial sort by (logit descending, id ascending), in tens of
  // microseconds instead of hundreds over a 151,936-token vocabulary.
  if (params.greedy()) return static_cast<int32_t>(Argmax(l, vocab));

  // The candidates, best first, and the normalizer of the top-p
  // probabilities (at temperature 1, as llama.cpp): top-k's heap and the
  // sum of its k weights; or, with top-k off, the whole vocabulary's
  // softmax denominator (kernels/softmax_denominator.h, in an order fixed
  // by the ids) and only as many of the best as the truncations reach
  // (Candidates).
  const bool top_k_on = params.top_k > 0 && params.top_k < vocab;
  std::span<TopLogit> candidates;
  float max_logit;
  double total = 0;
  size_t n;
  if (top_k_on) {
    candidates = std::span<TopLogit>(top_.data(), static_cast<size_t>(TopK(l, vocab, params.top_k, top_.data())));
    if (candidates.empty()) return 0;  // every logit NaN
    max_logit = candidates[0].logit;
    if (std::isinf(max_logit)) return candidates[0].id;  // +inf (or all -inf): the softmax's limit
    if (params.top_p < 1.0f) {
      for (const TopLogit& c : candidates) total += Weight(c.logit, max_logit);
    }
    bool open;
    n = Truncate(params, candidates, max_logit, total, &open);
  } else {
    const int64_t best = Argmax(l, vocab);
    max_logit = l[best];
    if (std::isnan(max_logit)) return 0;  // every logit NaN
    if (std::isinf(max_logit)) return static_cast<int32_t>(best);  // as above
    if (params.top_p < 1.0f) total = SoftmaxDenominator(l, vocab, max_logit);
    candidates = Candidates(params, l, vocab, max_logit, total, &n);
  }
  candidates = candidates.first(n);

  // Temperature, then draw.
  double drawn_total = 0;
  for (TopLogit& c : candidates) {
    c.logit = static_cast<float>(ExpOfNonPositive(static_cast<double>(c.logit - max_logit) / params.temperature));
    drawn_total += c.logit;
  }
  const double u = rng->Uniform() * drawn_total;
  double cumulative = 0;
  for (const TopLogit& c : candidates) {
    cumulative += c.logit;
    if (u < cumulative) return c.id;
  }
  return candidates.back().id;
}

double Sampler::Weight(float logit, float max_logit) {
  return ExpOfNonPositive(static_cast<double>(logit - max_logit));
}

size_t Sampler::Truncate(const SamplingParams& params, std::span<const TopLogit> c, float max_logit,
                         double total, bool* open) {
  size_t n = c.size();
  *open = true;
  if (params.top_p < 1.0f) {
    double cumulative = 0;
    n = 0;
    while (n < c.size()) {
      cumulative += Weight(c[n].logit, max_logit) / total;
      ++n;
      if (cumulative >= params.top_p) {
        *open = false;
        break;
      }
    }
  }
  if (params.min_p > 0.0f) {
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)
    const float threshold = max_logit + std::log(params.min_p);
    size_t m = 1;
    while (m < n && c[m].logit >= threshold) ++m;
    if (m < n) *open = false;
    n = m;
  }
  return n;
}

std::span<TopLogit> Sampler::Candidates(const SamplingParams& params, const float* l, int vocab, float max_logit,
                                        double total, size_t* n) {
  // The logits above max - depth are the best of the vocabulary's order:
  // sorted, they are its first ones. Top-p usually stops within a few nats
  // of the top; min-p alone stops at log(min_p) (one nat more, so that a
  // candidate below it ends the walk). With neither, or when the few do
  // not decide, the whole vocabulary is sorted.
  if (vocab > kFewCandidates && (params.top_p < 1.0f || params.min_p > 0.0f)) {
    float depth = params.top_p < 1.0f ? kFirstDepth : 1.0f - std::log(params.min_p);
    for (int attempt = 0; attempt < 3; ++attempt, depth *= 2) {
      const int found = LogitsAbove(l, vocab, max_logit - depth, kFewCandidates, top_.data());
      if (found > kFewCandidates) break;
      std::span<TopLogit> few(top_.data(), static_cast<size_t>(found));
      std::sort(few.begin(), few.end(), BetterLogit());
      bool open;
      *n = Truncate(params, few, max_logit, total, &open);
      if (!open || found == vocab) return few;
    }
  }
  std::span<TopLogit> all(top_.data(), static_cast<size_t>(SortLogits(l, vocab, top_.data(), sort_scratch_.data())));
  bool open;
  *n = Truncate(params, all, max_logit, total, &open);
  return all;
}

Sampler::Partition Sampler::SoftmaxPartition(std::span<const float> logits) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  Partition p{logits[Argmax(logits.data(), vocab)], 0.0f, 0, static_cast<int>(vocab)};
  if (std::isfinite(p.max_logit)) {
    p.log_z = static_cast<float>(std::log(SoftmaxDenominator(logits.data(), vocab, p.max_logit))) + p.max_logit;
  } else {
    p.at_max = static_cast<int>(std::count(logits.begin(), logits.end(), p.max_logit));
  }
  return p;
}

float Sampler::Partition::LogprobOf(float logit) const {
  if (std::isfinite(max_logit)) return logit - log_z;
  if (max_logit > 0) {  // +inf: those at +inf share the mass
    return logit == max_logit ? -std::log(static_cast<float>(at_max)) : -std::numeric_limits<float>::infinity();
  }
  return -std::log(static_cast<float>(vocab));  // all -inf: uniform
}

int Sampler::Logprobs(std::span<const float> logits, int32_t token, int n, float* logprob,
                      std::pair<int32_t, float>* top) {
  const int vocab = static_cast<int>(logits.size());
  const Partition p = SoftmaxPartition(logits);
  *logprob = p.LogprobOf(logits[token]);
  n = std::min(n, vocab);
  if (n <= 0) return 0;
  n = TopK(logits.data(), vocab, n, top_.data());
  for (int i = 0; i < n; ++i) top[i] = {top_[i].id, p.LogprobOf(top_[i].logit)};
  return n;
}

void Sampler::TopLogprobs(std::span<const float> logits, int n,
                          std::vector<std::pair<int32_t, float>>* out) {
  out->clear();
  const int vocab = static_cast<int>(logits.size());
  n = std::min(n, vocab);
  if (n <= 0) return;
  const Partition p = SoftmaxPartition(logits);
  n = TopK(logits.data(), vocab, n, top_.data());
  for (int i = 0; i < n; ++i) out->emplace_back(top_[i].id, p.LogprobOf(top_[i].logit));
}

float Sampler::Logprob(std::span<const float> logits, int32_t token) {
  return SoftmaxPartition(logits).LogprobOf(logits[token]);
}

}  // namespace kvs
