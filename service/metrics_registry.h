// A small metrics registry rendered in the Prometheus text exposition
// format (version 0.0.4), for `kvsessiond --metrics-listen`.
//
//   Registry registry;
//   Counter* c = registry.AddCounter("kvsession_things_total", "Things done.", {{"kind", "a"}});
//   Histogram* h = registry.AddHistogram("kvsession_wait_seconds", "Waits.", LatencyBuckets());
//   registry.AddCollector([&](Exposition& out) { out.Gauge("kvsession_open", "Open.", {}, n); });
//   c->Add(); h->Observe(0.003);
//   std::string text = registry.Render();
//
// Metrics the registry owns (Counter, Gauge, Histogram) live as long as the
// registry; callers keep the returned pointers and update them on the hot
// path: an update is a few relaxed atomic operations, never a lock or an
// allocation. Values that other components already count (engine steps,
// KV pages, store sizes) are not counted twice: a collector reads them at
// scrape time and writes whole families through Exposition.
//
// Names: `kvsession_..._total` for counters, `_seconds` / `_bytes` units.
// Every sample of one family is rendered together under one HELP and TYPE
// line; a family's name, type and label names are fixed by its first
// registration (a later registration with the same name must agree, or it
// aborts: a programming error seen by every test that builds the registry).
// Collectors must not write a family the registry owns, nor the same family
// twice in one scrape.
//
// Thread safety: metric updates and Render may run concurrently from any
// threads; registration (Add*) may too (it takes the registry's mutex, as
// Render does). Histogram sums and counts are read without a snapshot
// across buckets, so a scrape concurrent with an Observe may see the count
// one ahead of the buckets: Prometheus tolerates that.
#ifndef KVSESSION_SERVICE_METRICS_REGISTRY_H_
#define KVSESSION_SERVICE_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvs::metrics {

// Label name/value pairs, in the order rendered.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing count.
class Counter {
 public:
  void Add(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Observations counted in fixed buckets (upper bounds, strictly
// increasing; +Inf is implicit), with their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  // Counts `v` in the first bucket whose bound is >= v (NaN is ignored).
  void Observe(double v);

  const std::vector<double>& bounds() const { return bounds_; }
  // Observations in bucket i alone (not cumulative); i == bounds().size()
  // is the +Inf bucket.
  uint64_t bucket(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const;

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_bits_{0};  // a double's bits (CAS-added)
};

// Bucket sets used by kvsessiond.
std::vector<double> LatencyBuckets();     // 1 ms .. 60 s, for calls and persists
std::vector<double> TokenLatencyBuckets();  // 1 ms .. 10 s, for time to first / per token
std::vector<double> CountBuckets(int max);  // 1, 2, 4, ... up to >= max, for batch sizes and queues

// Writes families in the text format: the target of collectors and of
// Registry::Render. Not thread-safe (one per scrape).
class Exposition {
 public:
  void Counter(std::string_view name, std::string_view help, const Labels& labels, double value);
  void Gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  // Starts a family without a sample (further samples with Sample()).
  void Family(std::string_view name, std::string_view help, std::string_view type);
  void Sample(std::string_view name, const Labels& labels, double value);
  void HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string last_family_;  // the family whose HELP/TYPE was written last
};

// Escapes a label value: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);
// A sample value: integers exactly, others with 17 significant digits,
// +Inf / -Inf / NaN as Prometheus spells them.
std::string FormatValue(double value);

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The metric of family `name` with `labels`, created on first use
  // (the same pointer for the same name and labels). Never null.
  Counter* AddCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* AddGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                          const Labels& labels = {});
  // Runs `collect` on every Render, after the owned families, in the order
  // added. It runs on the scraping thread and must not call back into the
  // registry.
  void AddCollector(std::function<void(Exposition&)> collect);

  // The whole exposition (text/plain; version=0.0.4).
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<metrics::Counter> counter;
    std::unique_ptr<metrics::Gauge> gauge;
    std::unique_ptr<metrics::Histogram> histogram;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type;
    std::vector<std::unique_ptr<Series>> series;
  };
  Series* FindOrAdd(const std::string& name, const std::string& help, Type type, const Labels& labels,
                    bool* created);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;
  std::vector<std::function<void(Exposition&)>> collectors_;
};

}  // namespace kvs::metrics

#endif  // KVSESSION_SERVICE_METRICS_REGISTRY_H_
