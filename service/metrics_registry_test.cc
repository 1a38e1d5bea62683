// The metrics registry and its Prometheus text rendering.
#include "service/metrics_registry.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvs::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsRegistry, ACounterRendersWithHelpTypeAndLabels) {
  Registry registry;
  Counter* c = registry.AddCounter("kvsession_things_total", "Things done.", {{"kind", "a"}});
  c->Add(3);
  c->Add();
  EXPECT_EQ(registry.Render(),
            "# HELP kvsession_things_total Things done.\n"
            "# TYPE kvsession_things_total counter\n"
            "kvsession_things_total{kind=\"a\"} 4\n");
}

TEST(MetricsRegistry, TheSameNameAndLabelsGiveTheSameMetricAndOneFamily) {
  Registry registry;
  Counter* a = registry.AddCounter("x_total", "X.", {{"k", "1"}});
  Counter* b = registry.AddCounter("x_total", "X.", {{"k", "2"}});
  EXPECT_EQ(a, registry.AddCounter("x_total", "X.", {{"k", "1"}}));
  EXPECT_NE(a, b);
  b->Add(2);
  const std::string text = registry.Render();
  EXPECT_EQ(text,
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{k=\"1\"} 0\nx_total{k=\"2\"} 2\n");
}

TEST(MetricsRegistry, AGaugeGoesUpAndDown) {
  Registry registry;
  Gauge* g = registry.AddGauge("open", "Open things.");
  g->Set(10);
  g->Add(-3);
  EXPECT_EQ(g->value(), 7);
  EXPECT_THAT(registry.Render(), HasSubstr("# TYPE open gauge\nopen 7\n"));
}

TEST(MetricsRegistry, AHistogramRendersCumulativeBucketsSumAndCount) {
  Registry registry;
  Histogram* h = registry.AddHistogram("wait_seconds", "Waits.", {0.1, 1}, {{"m", "x"}});
  h->Observe(0.05);
  h->Observe(0.1);  // a bound is inclusive
  h->Observe(0.5);
  h->Observe(7);
  EXPECT_EQ(registry.Render(),
            "# HELP wait_seconds Waits.\n# TYPE wait_seconds histogram\n"
            "wait_seconds_bucket{m=\"x\",le=\"0.10000000000000001\"} 2\n"
            "wait_seconds_bucket{m=\"x\",le=\"1\"} 3\n"
            "wait_seconds_bucket{m=\"x\",le=\"+Inf\"} 4\n"
            "wait_seconds_sum{m=\"x\"} 7.6500000000000004\n"
            "wait_seconds_count{m=\"x\"} 4\n");
}

TEST(MetricsRegistry, LabelValuesAndHelpAreEscaped) {
  Registry registry;
  registry.AddCounter("c_total", "Line one\nback\\slash", {{"v", "a\"b\\c\nd"}})->Add();
  EXPECT_EQ(registry.Render(),
            "# HELP c_total Line one\\nback\\\\slash\n# TYPE c_total counter\n"
            "c_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(MetricsRegistry, CollectorsAddFamiliesAtScrapeTime) {
  Registry registry;
  int64_t pages = 5;
  registry.AddCollector([&](Exposition& out) {
    out.Gauge("pages", "Pages.", {}, pages);
    out.Family("state", "By state.", "gauge");
    out.Sample("state", {{"s", "a"}}, 1);
    out.Sample("state", {{"s", "b"}}, 2.5);
  });
  pages = 6;
  EXPECT_EQ(registry.Render(),
            "# HELP pages Pages.\n# TYPE pages gauge\npages 6\n"
            "# HELP state By state.\n# TYPE state gauge\nstate{s=\"a\"} 1\nstate{s=\"b\"} 2.5\n");
}

TEST(MetricsRegistry, ValuesAreFormattedAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(123456789012), "123456789012");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
}

TEST(MetricsRegistry, CountBucketsDoubleUpToTheMaximum) {
  EXPECT_EQ(CountBuckets(1), (std::vector<double>{1}));
  EXPECT_EQ(CountBuckets(5), (std::vector<double>{1, 2, 4, 8}));
}

TEST(MetricsRegistry, ConcurrentUpdatesAreAllCounted) {
  Registry registry;
  Counter* c = registry.AddCounter("n_total", "N.");
  Histogram* h = registry.AddHistogram("h", "H.", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Add();
        h->Observe(0.5);
      }
    });
  }
  std::string scrape;
  for (int i = 0; i < 10; ++i) scrape = registry.Render();  // concurrent scrapes are safe
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
  EXPECT_EQ(h->count(), 40000u);
  EXPECT_DOUBLE_EQ(h->sum(), 20000);
  EXPECT_THAT(registry.Render(), HasSubstr("h_count 40000\n"));
  EXPECT_THAT(registry.Render(), Not(HasSubstr("NaN")));
}

}  // namespace
}  // namespace kvs::metrics
