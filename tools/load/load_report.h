// LoadReport: the figures of one run of the load tool, printed as tables
// (PrintReport) and as a JSON summary for tests (SummaryJson).
//
// Plain data; not synchronized (filled by the controller after the clients
// stopped).
#ifndef KVSESSION_TOOLS_LOAD_LOAD_REPORT_H_
#define KVSESSION_TOOLS_LOAD_LOAD_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tools/load/load_stats.h"
#include "tools/load/session_ledger.h"

namespace kvs::load {

struct RssSample {
  double t_s;   // since the start of the run
  int run;      // server process: 1 = first, +1 per restart
  int64_t kib;
};

struct LoadReport {
  // Setup
  std::string model;
  int clients = 0;
  double duration_s = 0;
  int kills_planned = 0;
  uint64_t seed = 0;
  std::string skipped_ops;  // comma-separated
  int tenants = 0;          // --tenants (0: none, no API keys)
  bool tls = false;         // --tls
  // What happened
  double load_s = 0;   // wall time of the load phase
  int kills = 0;       // mid-run kills done (the final check's kill is extra)
  int unexpected_exits = 0;  // server exits the tool did not cause
  std::vector<std::string> exit_notes;
  std::vector<double> restart_ms;  // kill -> serving again, less the drop below
  int page_cache_drops = 0;  // --drop-page-cache: times the data directory was dropped
  int64_t files_dropped = 0;  // files dropped over those times
  std::vector<double> drop_ms;  // how long each drop took (write-back included)
  bool hung = false;   // calls still running long after a kill
  std::string fatal;   // the run could not go on (server did not start, ...)
  VerifyResult verify;  // summed over every restart
  // With tenants, at each restart: surviving sessions read with another
  // tenant's key, and how many of those reads (or checkpoint listings)
  // showed another tenant's session or checkpoint. Breaches from the
  // clients' own checks are WRONG_RESULT errors.
  int64_t isolation_checked = 0;
  int64_t isolation_breaches = 0;
  // --tenant-quota ("max_sessions=4" or "max_sessions=4,max_store_bytes=
  // 300000", "" without): at each restart, the times tenant load-t0's
  // holding was counted against one of its limits (LoadController::
  // CheckQuota), and the times it was over that limit. Refusals are the errors of kind
  // kTenantQuota (QuotaRefusals).
  std::string tenant_quota;
  int64_t quota_checked = 0;
  int64_t quota_breaches = 0;
  std::map<std::string, LoadStats::MethodSummary> methods;
  std::map<LoadStats::ErrorKey, int64_t> errors;
  std::vector<double> ttft_ms;
  int64_t generated_tokens = 0;
  int64_t cancels = 0;
  int64_t unexpected_errors = 0;
  std::vector<std::string> unexpected_samples;
  std::vector<RssSample> rss;
  std::string end_state;  // the server's own figures at the end of the load

  bool passed() const {
    return fatal.empty() && !hung && verify.lost == 0 && verify.phantom == 0 && isolation_breaches == 0 &&
           quota_breaches == 0 && unexpected_errors == 0 && unexpected_exits == 0;
  }
  // Calls refused by --tenant-quota's quota (expected errors).
  int64_t QuotaRefusals() const;
};

void PrintReport(const LoadReport& report, std::FILE* out);
std::string SummaryJson(const LoadReport& report);

}  // namespace kvs::load

#endif  // KVSESSION_TOOLS_LOAD_LOAD_REPORT_H_
