#include "tools/load/load_report.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace kvs::load {
namespace {

constexpr size_t kMaxRssRows = 20;

double Mib(int64_t kib) { return kib / 1024.0; }

double Max(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

// Per server run: first and last sample.
struct RunDrift {
  int run;
  RssSample first;
  RssSample last;
};

std::vector<RunDrift> Drifts(const std::vector<RssSample>& rss) {
  std::vector<RunDrift> out;
  for (const RssSample& s : rss) {
    if (out.empty() || out.back().run != s.run) {
      out.push_back({s.run, s, s});
    } else {
      out.back().last = s;
    }
  }
  return out;
}

// The run the drift figure is quoted for: the longest one.
const RunDrift* Longest(const std::vector<RunDrift>& drifts) {
  const RunDrift* best = nullptr;
  for (const RunDrift& d : drifts) {
    if (!best || d.last.t_s - d.first.t_s > best->last.t_s - best->first.t_s) best = &d;
  }
  return best;
}

}  // namespace

int64_t LoadReport::QuotaRefusals() const {
  int64_t n = 0;
  for (const auto& [key, count] : errors) {
    if (key.kind == ErrorKind::kTenantQuota) n += count;
  }
  return n;
}

void PrintReport(const LoadReport& r, std::FILE* out) {
  std::fprintf(out, "kvs-load: %d clients, %.0f s, %d kills planned, seed %llu, model %s\n\n",
               r.clients, r.duration_s, r.kills_planned,
               static_cast<unsigned long long>(r.seed), r.model.c_str());
  if (r.tenants > 0 || r.tls) {
    const std::string who = r.tenants > 0 ? absl::StrCat(r.tenants, " tenants with API keys")
                                          : std::string("the default tenant, no API keys");
    const std::string quota = r.tenant_quota.empty() ? "" : absl::StrCat("; load-t0's quota ", r.tenant_quota);
    std::fprintf(out, "callers: %s, %s%s\n\n", who.c_str(), r.tls ? "over TLS" : "plaintext", quota.c_str());
  }
  if (!r.skipped_ops.empty()) std::fprintf(out, "skipped operations: %s\n\n", r.skipped_ops.c_str());
  if (!r.fatal.empty()) std::fprintf(out, "FATAL: %s\n\n", r.fatal.c_str());

  std::fprintf(out, "%-18s %9s %9s %11s %9s %9s\n", "method", "ok", "expected", "unexpected",
               "p50 ms", "p99 ms");
  for (const auto& [method, m] : r.methods) {
    std::fprintf(out, "%-18s %9lld %9lld %11lld %9.2f %9.2f\n", method.c_str(),
                 static_cast<long long>(m.ok), static_cast<long long>(m.expected_errors),
                 static_cast<long long>(m.unexpected_errors), m.p50_ms, m.p99_ms);
  }
  std::fprintf(out, "\nGenerate: TTFT p50 %.2f ms, p99 %.2f ms (%zu streams); %lld tokens, %.1f tokens/s "
               "over %.1f s; %lld cancelled by the tool\n",
               Percentile(r.ttft_ms, 0.50), Percentile(r.ttft_ms, 0.99), r.ttft_ms.size(),
               static_cast<long long>(r.generated_tokens),
               r.load_s > 0 ? r.generated_tokens / r.load_s : 0.0, r.load_s,
               static_cast<long long>(r.cancels));

  std::fprintf(out, "\nerrors by method and status code:\n");
  if (r.errors.empty()) std::fprintf(out, "  (none)\n");
  for (const auto& [key, count] : r.errors) {
    std::fprintf(out, "  %-18s %-20s %7lld  %-10s  %s%s%s\n", key.method.c_str(), key.code.c_str(),
                 static_cast<long long>(count), key.expected ? "expected" : "UNEXPECTED",
                 std::string(ErrorKindName(key.kind)).c_str(), key.quota.empty() ? "" : " ", key.quota.c_str());
  }
  for (const std::string& s : r.unexpected_samples) std::fprintf(out, "  e.g. %s\n", s.c_str());

  std::fprintf(out, "\nserver RSS (VmRSS sampled every 1 s; run = server process, +1 per restart):\n");
  std::fprintf(out, "  %8s %4s %9s\n", "t s", "run", "RSS MiB");
  const size_t n = r.rss.size();
  const size_t step = std::max<size_t>(1, (n + kMaxRssRows - 1) / kMaxRssRows);
  for (size_t i = 0; i < n; i += step) {
    const RssSample& s = r.rss[i];
    std::fprintf(out, "  %8.1f %4d %9.1f\n", s.t_s, s.run, Mib(s.kib));
  }
  if (n > 0 && (n - 1) % step != 0) {
    const RssSample& s = r.rss.back();
    std::fprintf(out, "  %8.1f %4d %9.1f\n", s.t_s, s.run, Mib(s.kib));
  }
  const std::vector<RunDrift> drifts = Drifts(r.rss);
  if (const RunDrift* d = Longest(drifts)) {
    std::fprintf(out, "  drift over the longest run (#%d, %.1f s): %.1f -> %.1f MiB (%+.1f MiB)\n",
                 d->run, d->last.t_s - d->first.t_s, Mib(d->first.kib), Mib(d->last.kib),
                 Mib(d->last.kib - d->first.kib));
  }

  if (!r.end_state.empty()) std::fprintf(out, "  server at the end of the load: %s\n", r.end_state.c_str());

  const std::vector<double>& restarts = r.restart_ms;
  std::fprintf(out, "\nkills: %d of %d planned (+1 final check); kill to serving again p50 %.0f ms, "
               "max %.0f ms%s\n", r.kills, r.kills_planned, Percentile(restarts, 0.5), Max(restarts),
               r.page_cache_drops > 0 ? " (the drop before each start not counted)" : "");
  if (r.page_cache_drops > 0) {
    const std::vector<double>& drops = r.drop_ms;
    std::fprintf(out, "data directory dropped from the page cache %d times (%lld files); a drop p50 %.0f ms, "
                 "max %.0f ms\n", r.page_cache_drops, static_cast<long long>(r.files_dropped),
                 Percentile(drops, 0.5), Max(drops));
  }
  std::fprintf(out, "server exits not caused by the tool: %d\n", r.unexpected_exits);
  for (const std::string& s : r.exit_notes) std::fprintf(out, "  %s\n", s.c_str());
  if (r.hung) std::fprintf(out, "calls still running long after a kill: YES\n");
  std::fprintf(out, "\nacknowledged calls checked %lld / lost %lld (phantom extensions %lld)\n",
               static_cast<long long>(r.verify.checked), static_cast<long long>(r.verify.lost),
               static_cast<long long>(r.verify.phantom));
  for (const std::string& p : r.verify.problems) std::fprintf(out, "  %s\n", p.c_str());
  if (r.tenants > 1) {
    std::fprintf(out, "tenant isolation at restarts: %lld reads of another tenant's session, %lld breaches\n",
                 static_cast<long long>(r.isolation_checked), static_cast<long long>(r.isolation_breaches));
  }
  if (!r.tenant_quota.empty()) {
    std::fprintf(out, "tenant quota %s: %lld calls refused; load-t0 over a limit at %lld of %lld checks\n",
                 r.tenant_quota.c_str(), static_cast<long long>(r.QuotaRefusals()),
                 static_cast<long long>(r.quota_breaches), static_cast<long long>(r.quota_checked));
  }
  std::fprintf(out, "unexpected errors: %lld\n", static_cast<long long>(r.unexpected_errors));
  std::fprintf(out, "RESULT: %s\n", r.passed() ? "PASS" : "FAIL");
}

std::string SummaryJson(const LoadReport& r) {
  nlohmann::json j;
  j["clients"] = r.clients;
  j["duration_s"] = r.duration_s;
  j["kills_planned"] = r.kills_planned;
  j["kills"] = r.kills;
  j["skipped_ops"] = r.skipped_ops;
  j["tenants"] = r.tenants;
  j["tls"] = r.tls;
  j["isolation_checked"] = r.isolation_checked;
  j["isolation_breaches"] = r.isolation_breaches;
  j["tenant_quota"] = r.tenant_quota;
  j["quota_refusals"] = r.QuotaRefusals();
  j["quota_checked"] = r.quota_checked;
  j["quota_breaches"] = r.quota_breaches;
  j["load_s"] = r.load_s;
  j["fatal"] = r.fatal;
  j["hung"] = r.hung;
  j["page_cache_drops"] = r.page_cache_drops;
  j["files_dropped"] = r.files_dropped;
  j["drop_p50_ms"] = Percentile(r.drop_ms, 0.50);
  j["drop_max_ms"] = Max(r.drop_ms);
  j["restart_p50_ms"] = Percentile(r.restart_ms, 0.50);
  j["restart_max_ms"] = Max(r.restart_ms);
  j["unexpected_exits"] = r.unexpected_exits;
  j["acknowledged_checked"] = r.verify.checked;
  j["acknowledged_lost"] = r.verify.lost;
  j["phantom"] = r.verify.phantom;
  j["unexpected_errors"] = r.unexpected_errors;
  j["generate_streams"] = r.ttft_ms.size();
  j["ttft_p50_ms"] = Percentile(r.ttft_ms, 0.50);
  j["ttft_p99_ms"] = Percentile(r.ttft_ms, 0.99);
  j["generated_tokens"] = r.generated_tokens;
  j["rss_samples"] = r.rss.size();
  nlohmann::json methods = nlohmann::json::object();
  for (const auto& [method, m] : r.methods) {
    methods[method] = {{"ok", m.ok}, {"expected_errors", m.expected_errors},
                       {"unexpected_errors", m.unexpected_errors}};
  }
  j["methods"] = methods;
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& [key, count] : r.errors) {
    errors.push_back({{"method", key.method}, {"code", key.code},
                      {"kind", std::string(ErrorKindName(key.kind))},
                      {"expected", key.expected}, {"count", count}});
    if (!key.quota.empty()) errors.back()["quota"] = key.quota;
  }
  j["errors"] = errors;
  j["passed"] = r.passed();
  return j.dump(2);
}

}  // namespace kvs::load
