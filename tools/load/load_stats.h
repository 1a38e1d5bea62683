// LoadStats: what the load tool's clients observed: calls and latencies per
// method, Generate's time to first token and tokens, and errors per method,
// status code and classification (error_classifier.h).
//
// Thread-safe (one mutex); clients record, the controller reads at the end.
#ifndef KVSESSION_TOOLS_LOAD_LOAD_STATS_H_
#define KVSESSION_TOOLS_LOAD_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tools/load/error_classifier.h"

namespace kvs::load {

// The q-quantile (0..1) of `values` by nearest rank; 0 when empty.
double Percentile(std::vector<double> values, double q);

class LoadStats {
 public:
  struct ErrorKey {
    std::string method;
    std::string code;  // "UNAVAILABLE", ..., or "WRONG_RESULT"
    ErrorKind kind;
    bool expected;
    std::string quota = {};  // kTenantQuota: the quota that refused (RefusedQuota); else ""
    auto operator<=>(const ErrorKey&) const = default;
  };
  struct MethodSummary {
    int64_t ok = 0;
    int64_t expected_errors = 0;
    int64_t unexpected_errors = 0;
    double p50_ms = 0;
    double p99_ms = 0;
  };

  void RecordOk(const std::string& method, double latency_ms);
  void RecordError(const std::string& method, const absl::Status& status, Classification c);
  // A result that contradicts an acknowledged call (always unexpected).
  void RecordWrongResult(const std::string& method, const std::string& what);
  void RecordGenerate(double ttft_ms, int64_t tokens);
  void RecordCancel();

  std::map<std::string, MethodSummary> Methods() const;
  std::map<ErrorKey, int64_t> Errors() const;
  std::vector<double> TtftMs() const;
  int64_t generated_tokens() const;
  int64_t cancels() const;
  int64_t unexpected_errors() const;
  // The first few unexpected errors (messages cut to 200 bytes).
  std::vector<std::string> UnexpectedSamples() const;

 private:
  void AddUnexpectedSample(std::string what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<double>> latencies_ms_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, MethodSummary> methods_ ABSL_GUARDED_BY(mu_);
  std::map<ErrorKey, int64_t> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<double> ttft_ms_ ABSL_GUARDED_BY(mu_);
  int64_t generated_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cancels_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unexpected_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> unexpected_samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_STATS_H_
