#include "service/metrics_registry.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvs::metrics {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  uint64_t old_bits = sum_bits_.load(std::memory_order_relaxed);
  while (!sum_bits_.compare_exchange_weak(old_bits, std::bit_cast<uint64_t>(std::bit_cast<double>(old_bits) + v),
                                          std::memory_order_relaxed)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

double Histogram::sum() const { return std::bit_cast<double>(sum_bits_.load(std::memory_order_relaxed)); }

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> TokenLatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> CountBuckets(int max) {
  std::vector<double> bounds;
  for (int64_t b = 1;; b *= 2) {
    bounds.push_back(static_cast<double>(b));
    if (b >= max) break;
  }
  return bounds;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", value);
  }
  return buf;
}

namespace {

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendLabels(std::string& text, const Labels& labels, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return;
  text += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) text += ',';
    first = false;
    text += name;
    text += "=\"";
    text += EscapeLabelValue(value);
    text += '"';
  }
  if (!extra_name.empty()) {
    if (!first) text += ',';
    text += extra_name;
    text += "=\"";
    text += extra_value;
    text += '"';
  }
  text += '}';
}

}  // namespace

void Exposition::Family(std::string_view name, std::string_view help, std::string_view type) {
  if (last_family_ == name) return;
  last_family_ = std::string(name);
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += EscapeHelp(help);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void Exposition::Sample(std::string_view name, const Labels& labels, double value) {
  text_ += name;
  AppendLabels(text_, labels);
  text_ += ' ';
  text_ += FormatValue(value);
  text_ += '\n';
}

void Exposition::Counter(std::string_view name, std::string_view help, const Labels& labels, double value) {
  Family(name, help, "counter");
  Sample(name, labels, value);
}

void Exposition::Gauge(std::string_view name, std::string_view help, const Labels& labels, double value) {
  Family(name, help, "gauge");
  Sample(name, labels, value);
}

void Exposition::HistogramSamples(std::string_view name, const Labels& labels, const Histogram& h) {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds().size(); ++i) {
    cumulative += h.bucket(i);
    text_ += bucket;
    AppendLabels(text_, labels, "le", i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf");
    text_ += ' ';
    text_ += FormatValue(static_cast<double>(cumulative));
    text_ += '\n';
  }
  Sample(std::string(name) + "_sum", labels, h.sum());
  // The count is the +Inf bucket's, so the two always agree.
  Sample(std::string(name) + "_count", labels, static_cast<double>(cumulative));
}

Registry::Series* Registry::FindOrAdd(const std::string& name, const std::string& help, Type type,
                                      const Labels& labels, bool* created) {
  Family* family = nullptr;
  for (auto& f : families_) {
    if (f->name == name) family = f.get();
  }
  if (family == nullptr) {
    families_.push_back(std::make_unique<Family>(Family{name, help, type, {}}));
    family = families_.back().get();
  } else if (family->type != type) {
    std::fprintf(stderr, "metrics: %s registered with two types\n", name.c_str());
    std::abort();
  }
  for (auto& s : family->series) {
    if (s->labels == labels) {
      *created = false;
      return s.get();
    }
  }
  family->series.push_back(std::make_unique<Series>(Series{labels, nullptr, nullptr, nullptr}));
  *created = true;
  return family->series.back().get();
}

Counter* Registry::AddCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  Series* s = FindOrAdd(name, help, Type::kCounter, labels, &created);
  if (created) s->counter = std::make_unique<metrics::Counter>();
  return s->counter.get();
}

Gauge* Registry::AddGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  Series* s = FindOrAdd(name, help, Type::kGauge, labels, &created);
  if (created) s->gauge = std::make_unique<metrics::Gauge>();
  return s->gauge.get();
}

Histogram* Registry::AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                  const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  Series* s = FindOrAdd(name, help, Type::kHistogram, labels, &created);
  if (created) s->histogram = std::make_unique<metrics::Histogram>(std::move(bounds));
  return s->histogram.get();
}

void Registry::AddCollector(std::function<void(Exposition&)> collect) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  Exposition out;
  for (const auto& f : families_) {
    switch (f->type) {
      case Type::kCounter:
        out.Family(f->name, f->help, "counter");
        for (const auto& s : f->series) out.Sample(f->name, s->labels, static_cast<double>(s->counter->value()));
        break;
      case Type::kGauge:
        out.Family(f->name, f->help, "gauge");
        for (const auto& s : f->series) out.Sample(f->name, s->labels, static_cast<double>(s->gauge->value()));
        break;
      case Type::kHistogram:
        out.Family(f->name, f->help, "histogram");
        for (const auto& s : f->series) out.HistogramSamples(f->name, s->labels, *s->histogram);
        break;
    }
  }
  for (const auto& collect : collectors_) collect(out);
  return out.text();
}

}  // namespace kvs::metrics
