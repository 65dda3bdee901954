// `oar launch --timeline`: one Chrome trace of a 2 x 2 job, a lane per
// process (named for its role), the trainers' RPC ops and the pservers'
// request handling and optimize ops as spans, nested properly in every
// thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/util/oar_process.h"

namespace oar {
namespace {

TEST(TimelineE2eTest, ATwoByTwoJobIsOneTraceWithALanePerProcess) {
  const std::string dir = TempDir("timeline_e2e");
  const Result r =
      Oar("launch --pservers 2 --trainers 2 --model fashion_mlp --epochs 1 --limit 1280 "
          "--batch_size 64 --timeline " +
          dir + "/job.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("timeline of 4 processes in " + dir + "/job.json"), std::string::npos) << r.out;
  std::ifstream in(dir + "/job.json");
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(trace.is_discarded()) << "not JSON";
  ASSERT_TRUE(trace.contains("traceEvents"));

  std::map<int, std::string> lane;                                                // pid -> process name
  std::map<int, std::set<std::string>> names;                                     // pid -> span names
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> spans;  // (pid, tid) -> [start, end)
  for (const auto& e : trace["traceEvents"]) {
    const int pid = e["pid"].get<int>();
    if (e["ph"] == "M" && e["name"] == "process_name") lane[pid] = e["args"]["name"].get<std::string>();
    if (e["ph"] != "X") continue;
    names[pid].insert(e["name"].get<std::string>());
    const int64_t ts = e["ts"].get<int64_t>(), dur = e["dur"].get<int64_t>();
    EXPECT_GE(dur, 0);
    spans[{pid, e["tid"].get<int>()}].push_back({ts, ts + dur});
  }
  ASSERT_EQ(lane.size(), 4u) << trace.dump().substr(0, 2000);
  int pservers = 0;
  std::set<std::string> trainers;
  for (const auto& [pid, name] : lane) {
    if (name.rfind("pserver 127.0.0.1:", 0) == 0) {
      ++pservers;
      for (const char* s : {"rpc:SendVariable", "rpc:GetVariable", "rpc:BatchBarrier", "rpc:FetchBarrier"}) {
        EXPECT_TRUE(names[pid].count(s)) << name << " has no " << s;
      }
      EXPECT_TRUE(names[pid].count("sgd") || names[pid].count("adam") || names[pid].count("momentum"))
          << name << " ran no optimize op";
    } else {
      trainers.insert(name);
      for (const char* s : {"mul", "mul_grad", "send", "send_barrier", "recv", "fetch_barrier"}) {
        EXPECT_TRUE(names[pid].count(s)) << name << " has no " << s;
      }
    }
  }
  EXPECT_EQ(pservers, 2);
  EXPECT_EQ(trainers, (std::set<std::string>{"trainer 0", "trainer 1"}));
  // In one thread, spans are disjoint or nested (an op inside a block op),
  // never overlapping half-way (1 us of rounding allowed).
  for (auto& [key, list] : spans) {
    std::sort(list.begin(), list.end(),
              [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<int64_t> open;  // ends of the enclosing spans
    for (const auto& [start, end] : list) {
      while (!open.empty() && open.back() <= start + 1) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back() + 1) << "lane " << lane[key.first] << " thread " << key.second << ": a span at "
                                        << start << " crosses its parent's end";
      }
      open.push_back(end);
    }
  }
}

}  // namespace
}  // namespace oar
