// The registry's text exposition: exact lines for each type, escaping, and
// `promtool check metrics` (Prometheus' own linter) over all of it.
#include "common/metrics/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "common/metrics/process_metrics.h"
#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

namespace oar::metrics {
namespace {

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

// The value of the sample line that starts "name " in `text`; -1 if none.
double Sample(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2, text.find('\n', at + 1) - at - name.size() - 2));
}

TEST(MetricsTest, CountersAndGaugesRenderWithHelpTypeAndLabels) {
  Registry r;
  r.AddCounter("oar_steps_total", "Steps run")->With({})->Add(3);
  auto* bytes = r.AddCounter("oar_rpc_bytes_total", "Bytes", {"method", "peer"});
  bytes->With({"SendVariable", "127.0.0.1:1"})->Add(1024);
  bytes->With({"GetVariable", "127.0.0.1:1"})->Add(0.5);
  r.AddGauge("oar_queue_depth", "Queued", {"kind"})->With({"send"})->Set(-2);
  const std::string text = r.Render();
  EXPECT_TRUE(Has(text, "# HELP oar_steps_total Steps run")) << text;
  EXPECT_TRUE(Has(text, "# TYPE oar_steps_total counter")) << text;
  EXPECT_TRUE(Has(text, "oar_steps_total 3")) << text;
  EXPECT_TRUE(Has(text, "oar_rpc_bytes_total{method=\"SendVariable\",peer=\"127.0.0.1:1\"} 1024")) << text;
  EXPECT_TRUE(Has(text, "oar_rpc_bytes_total{method=\"GetVariable\",peer=\"127.0.0.1:1\"} 0.5")) << text;
  EXPECT_TRUE(Has(text, "# TYPE oar_queue_depth gauge")) << text;
  EXPECT_TRUE(Has(text, "oar_queue_depth{kind=\"send\"} -2")) << text;
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  Histogram* h = r.AddHistogram("oar_step_seconds", "Step time", {"role"}, {0.1, 1})->With({"trainer"});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h->Observe(v);
  const std::string text = r.Render();
  EXPECT_TRUE(Has(text, "# TYPE oar_step_seconds histogram")) << text;
  EXPECT_TRUE(Has(text, "oar_step_seconds_bucket{role=\"trainer\",le=\"0.1\"} 2")) << text;  // le is inclusive
  EXPECT_TRUE(Has(text, "oar_step_seconds_bucket{role=\"trainer\",le=\"1\"} 3")) << text;
  EXPECT_TRUE(Has(text, "oar_step_seconds_bucket{role=\"trainer\",le=\"+Inf\"} 4")) << text;
  EXPECT_TRUE(Has(text, "oar_step_seconds_sum{role=\"trainer\"} 3.65")) << text;
  EXPECT_TRUE(Has(text, "oar_step_seconds_count{role=\"trainer\"} 4")) << text;
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  Registry r;
  r.AddCounter("oar_x_total", "a \\ b\nc", {"v"})->With({"q\"uo\\te\nd"})->Add();
  const std::string text = r.Render();
  EXPECT_TRUE(Has(text, "# HELP oar_x_total a \\\\ b\\nc")) << text;
  EXPECT_TRUE(Has(text, "oar_x_total{v=\"q\\\"uo\\\\te\\nd\"} 1")) << text;
}

TEST(MetricsTest, AddingANameTwiceReturnsTheSameFamily) {
  Registry r;
  auto* a = r.AddCounter("oar_a_total", "first", {"k"});
  auto* b = r.AddCounter("oar_a_total", "second", {"k"});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a->With({"x"}), b->With({"x"}));
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  Counter* c = r.AddCounter("oar_c_total", "c")->With({});
  Histogram* h = r.AddHistogram("oar_h_seconds", "h")->With({});
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Add();
        h->Observe(0.001);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(c->Value(), 40000);
  EXPECT_EQ(h->Count(), 40000u);
}

TEST(MetricsTest, CallbacksAreReadAtRenderAndCanBeRemoved) {
  Registry r;
  double depth = 7;
  r.AddCallback("oar_depth", "d", Type::kGauge, [&] { return depth; });
  EXPECT_TRUE(Has(r.Render(), "oar_depth 7"));
  depth = 9;
  EXPECT_TRUE(Has(r.Render(), "oar_depth 9"));
  r.RemoveCallback("oar_depth");
  EXPECT_EQ(r.Render().find("oar_depth 9"), std::string::npos);
}

TEST(MetricsTest, ProcessMetricsReadProc) {
  Registry r;
  AddProcessMetrics(&r);
  const std::string text = r.Render();
  EXPECT_GT(Sample(text, "process_resident_memory_bytes"), 1e6) << text;  // a gtest binary holds more than 1 MB
  EXPECT_GT(Sample(text, "process_start_time_seconds"), 1.6e9) << text;
  EXPECT_GE(Sample(text, "process_cpu_seconds_total"), 0) << text;  // present (ticks may still be 0)
  EXPECT_GT(Sample(text, "process_open_fds"), 2) << text;
}

// Prometheus' own linter over every kind of family this registry writes.
TEST(MetricsTest, PromtoolAcceptsTheExposition) {
  OAR_NEED_TOOL(RunCommand("promtool --version").code == 0, "promtool (Debian's prometheus)");
  Registry r;
  r.AddCounter("oar_steps_total", "Steps run")->With({})->Add(3);
  r.AddCounter("oar_rpc_sent_bytes_total", "Bytes", {"method", "peer"})->With({"Send", "a:1"})->Add(9);
  r.AddGauge("oar_queue_depth", "Queued", {"kind"})->With({"send"})->Set(2);
  r.AddHistogram("oar_step_duration_seconds", "Step time")->With({})->Observe(0.2);
  AddProcessMetrics(&r);
  const std::string path = TempDir("promtool") + "/metrics.txt";
  std::ofstream(path) << r.Render();
  const Result check = RunCommand("promtool check metrics < " + path);
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_EQ(check.out, "") << "promtool's lint findings:\n" << check.out;
}

}  // namespace
}  // namespace oar::metrics
