// The profiler: spans from several threads, Fluid's table and its orders,
// the Chrome trace and its merge; and an Executor that times its ops.
#include "common/profiler/profiler.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "common/framework/run_env.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

absl::Time At(int64_t us) { return absl::FromUnixMicros(us); }

TEST(ProfilerTest, RecordsFromEveryThreadEachInItsOwnLane) {
  Profiler p;
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&p, t] {
      for (int i = 0; i < 100; ++i) p.Record("op" + std::to_string(t), "op", At(i * 10), At(i * 10 + 5));
    });
  }
  for (auto& t : ts) t.join();
  const auto events = p.Events();
  ASSERT_EQ(events.size(), 300u);
  std::map<std::string, std::set<int>> lanes;
  for (const auto& e : events) lanes[e.name].insert(e.tid);
  for (const auto& [name, tids] : lanes) EXPECT_EQ(tids.size(), 1u) << name << " came from one thread";
  EXPECT_DOUBLE_EQ(p.TotalSeconds(), 300 * 5e-6);
}

TEST(ProfilerTest, TheTableHasFluidsColumnsAndOrders) {
  Profiler p;
  p.Record("mul", "op", At(0), At(3000));      // 3 ms
  p.Record("mul", "op", At(5000), At(6000));   // 1 ms
  p.Record("relu", "op", At(7000), At(7500));  // 0.5 ms, once
  p.Record("sgd", "op", At(8000), At(8200));   // 0.2 ms
  p.Record("sgd", "op", At(9000), At(9200));
  p.Record("sgd", "op", At(9500), At(9700));  // 3 calls, 0.6 ms
  const std::string total = p.Report(Profiler::SortedKey::kTotal);
  EXPECT_NE(total.find("Event"), std::string::npos) << total;
  for (const char* col : {"Calls", "Total", "Min.", "Max.", "Ave.", "Ratio."}) {
    EXPECT_NE(total.find(col), std::string::npos) << col;
  }
  // mul: 2 calls, total 4 ms, min 1, max 3, average 2, ratio 4 / 5.1.
  const size_t row = total.find("\nmul ");
  ASSERT_NE(row, std::string::npos) << total;
  std::istringstream fields(total.substr(row + 1, total.find('\n', row + 1) - row - 1));
  std::string name;
  double calls, sum, min, max, ave, ratio;
  fields >> name >> calls >> sum >> min >> max >> ave >> ratio;
  EXPECT_EQ(calls, 2);
  EXPECT_DOUBLE_EQ(sum, 4);
  EXPECT_DOUBLE_EQ(min, 1);
  EXPECT_DOUBLE_EQ(max, 3);
  EXPECT_DOUBLE_EQ(ave, 2);
  EXPECT_NEAR(ratio, 4 / 5.1, 1e-6);
  auto order = [](const std::string& t) {
    return std::vector<size_t>{t.find("\nmul "), t.find("\nrelu "), t.find("\nsgd ")};
  };
  auto o = order(total);  // total: mul 4, sgd 0.6, relu 0.5
  EXPECT_LT(o[0], o[2]);
  EXPECT_LT(o[2], o[1]);
  o = order(p.Report(Profiler::SortedKey::kCalls));  // sgd 3, mul 2, relu 1
  EXPECT_LT(o[2], o[0]);
  EXPECT_LT(o[0], o[1]);
  o = order(p.Report(Profiler::SortedKey::kMin));  // mul 1, relu 0.5, sgd 0.2
  EXPECT_LT(o[0], o[1]);
  EXPECT_LT(o[1], o[2]);
  o = order(p.Report(Profiler::SortedKey::kAve));  // mul 2, relu 0.5, sgd 0.2
  EXPECT_LT(o[0], o[1]);
  EXPECT_LT(o[1], o[2]);
}

TEST(ProfilerTest, ASortedKeyThatIsNotFluidsIsRefusedByName) {
  Profiler::SortedKey key;
  EXPECT_TRUE(Profiler::ParseSortedKey("ave", &key).ok());
  EXPECT_EQ(key, Profiler::SortedKey::kAve);
  absl::Status s = Profiler::ParseSortedKey("median", &key);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'median'"), std::string::npos) << s;
}

TEST(ProfilerTest, TracesAreTraceEventJsonAndMergeOneLanePerProcess) {
  const std::string dir = TempDir("profiler_trace");
  Profiler a, b;
  a.Record("mul", "op", At(100), At(150));
  b.Record("rpc:GetVariable", "rpc", At(120), At(130));
  ASSERT_TRUE(a.WriteTrace(dir + "/a.json", "trainer 0").ok());
  ASSERT_TRUE(b.WriteTrace(dir + "/b.json", "pserver 127.0.0.1:1").ok());
  ASSERT_TRUE(MergeTraces({dir + "/a.json", dir + "/b.json"}, dir + "/all.json").ok());
  std::ifstream in(dir + "/all.json");
  const auto trace = nlohmann::json::parse(in);
  std::map<int, std::string> names;
  int spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_EQ(e["name"] == "mul" ? 0 : 1, e["pid"].get<int>());
      EXPECT_EQ(e["name"] == "mul" ? 50 : 10, e["dur"].get<int>());
    }
  }
  EXPECT_EQ(spans, 2);
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "trainer 0"}, {1, "pserver 127.0.0.1:1"}}));
  absl::Status missing = MergeTraces({dir + "/nope.json"}, dir + "/x.json");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("nope.json"), std::string::npos) << missing;
  std::ofstream(dir + "/bad.json") << "{not json";
  EXPECT_EQ(MergeTraces({dir + "/bad.json"}, dir + "/x.json").code(), absl::StatusCode::kInvalidArgument);
}

// The table's total is the time the executor spent running the steps.
TEST(ProfilerTest, AnExecutorsOpSpansAddUpToItsStepTime) {
  UniqueNameGuard names;
  Program main, startup;
  std::string loss;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {256});
    Var h = layers::fc(layers::fc(x, 256, "relu"), 256, "relu");
    Var l = layers::mean(layers::fc(h, 10));
    optimizer::SGD(0.01f).minimize(l);
    loss = l.name();
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Profiler prof;
  RunEnv env;
  Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  Tensor x;
  float* p = x.mutable_data<float>({64, 256});
  for (int i = 0; i < 64 * 256; ++i) p[i] = static_cast<float>(i % 7) * 0.1f;
  {
    auto warm = exe.Run(main.desc(), &scope, {{"x", x}}, {loss});  // prepared and warm
    ASSERT_TRUE(warm.ok()) << warm.status();
  }
  env.profiler = &prof;
  const int steps = 30;
  const absl::Time start = absl::Now();
  for (int i = 0; i < steps; ++i) ASSERT_TRUE(exe.Run(main.desc(), &scope, {{"x", x}}, {loss}).ok());
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  std::map<std::string, int> calls;
  for (const auto& e : prof.Events()) ++calls[e.name];
  EXPECT_EQ(calls["mul"], 3 * steps);
  EXPECT_EQ(calls["mul_grad"], 3 * steps);
  EXPECT_EQ(calls["sgd"], 6 * steps);
  // Every op's time lies inside the run (how much of the run the ops fill
  // depends on the machine's load, so that is not checked).
  const int64_t start_us = absl::ToUnixMicros(start), end_us = start_us + static_cast<int64_t>(wall * 1e6) + 1;
  for (const auto& e : prof.Events()) {
    EXPECT_GE(e.start_us, start_us) << e.name;
    EXPECT_LE(e.start_us + e.dur_us, end_us) << e.name;
  }
  EXPECT_GT(prof.TotalSeconds(), 0) << prof.Report(Profiler::SortedKey::kTotal);
  EXPECT_LE(prof.TotalSeconds(), wall);
}

}  // namespace
}  // namespace oar
