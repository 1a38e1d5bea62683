#include "tools/load/load_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvs::load {
namespace {

constexpr size_t kMaxSamples = 10;
constexpr size_t kMaxMessageBytes = 200;

std::string CodeName(const absl::Status& status) {
  return absl::StatusCodeToString(status.code());
}

}  // namespace

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

void LoadStats::AddUnexpectedSample(std::string what) {
  ++unexpected_;
  if (unexpected_samples_.size() >= kMaxSamples) return;
  if (what.size() > kMaxMessageBytes) what.resize(kMaxMessageBytes);
  unexpected_samples_.push_back(std::move(what));
}

void LoadStats::RecordOk(const std::string& method, double latency_ms) {
  absl::MutexLock lock(&mu_);
  ++methods_[method].ok;
  latencies_ms_[method].push_back(latency_ms);
}

void LoadStats::RecordError(const std::string& method, const absl::Status& status,
                            Classification c) {
  absl::MutexLock lock(&mu_);
  ++errors_[{method, CodeName(status), c.kind, c.expected,
             c.kind == ErrorKind::kTenantQuota ? std::string(RefusedQuota(status)) : std::string()}];
  if (c.expected) {
    ++methods_[method].expected_errors;
  } else {
    ++methods_[method].unexpected_errors;
    AddUnexpectedSample(absl::StrCat(method, ": ", CodeName(status), ": ", status.message()));
  }
}

void LoadStats::RecordWrongResult(const std::string& method, const std::string& what) {
  absl::MutexLock lock(&mu_);
  ++errors_[{method, "WRONG_RESULT", ErrorKind::kOther, false}];
  ++methods_[method].unexpected_errors;
  AddUnexpectedSample(absl::StrCat(method, ": WRONG_RESULT: ", what));
}

void LoadStats::RecordGenerate(double ttft_ms, int64_t tokens) {
  absl::MutexLock lock(&mu_);
  if (ttft_ms >= 0) ttft_ms_.push_back(ttft_ms);
  generated_tokens_ += tokens;
}

void LoadStats::RecordCancel() {
  absl::MutexLock lock(&mu_);
  ++cancels_;
}

std::map<std::string, LoadStats::MethodSummary> LoadStats::Methods() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, MethodSummary> out = methods_;
  for (auto& [method, summary] : out) {
    auto it = latencies_ms_.find(method);
    if (it == latencies_ms_.end()) continue;
    summary.p50_ms = Percentile(it->second, 0.50);
    summary.p99_ms = Percentile(it->second, 0.99);
  }
  return out;
}

std::map<LoadStats::ErrorKey, int64_t> LoadStats::Errors() const {
  absl::MutexLock lock(&mu_);
  return errors_;
}

std::vector<double> LoadStats::TtftMs() const {
  absl::MutexLock lock(&mu_);
  return ttft_ms_;
}

int64_t LoadStats::generated_tokens() const {
  absl::MutexLock lock(&mu_);
  return generated_tokens_;
}

int64_t LoadStats::cancels() const {
  absl::MutexLock lock(&mu_);
  return cancels_;
}

int64_t LoadStats::unexpected_errors() const {
  absl::MutexLock lock(&mu_);
  return unexpected_;
}

std::vector<std::string> LoadStats::UnexpectedSamples() const {
  absl::MutexLock lock(&mu_);
  return unexpected_samples_;
}

}  // namespace kvs::load
