// A 2 x 2 job's metrics (`oar launch --metrics --metrics_dir`), checked by
// value across processes: the examples the trainers counted are the
// examples the job trained, every pserver ran every step, and the bytes
// each trainer says it sent to a pserver are the bytes that pserver says it
// received from that trainer, and those it pulled are those the pserver
// lent from shared memory. Prometheus' promtool checks every file. An nccl2
// job's trainers report the time their all-reduces took.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

// Every sample line of a metrics file: "name{labels}" -> value.
std::map<std::string, double> Samples(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, double> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// The values of the samples whose key starts with `prefix`, sorted.
std::vector<double> ValuesOf(const std::map<std::string, double>& s, const std::string& prefix) {
  std::vector<double> v;
  for (const auto& [k, x] : s) {
    if (k.rfind(prefix, 0) == 0) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(MetricsE2eTest, ATwoByTwoJobsMetricsAgreeWithWhatItTrained) {
  const std::string dir = TempDir("metrics_e2e");
  const int64_t examples = 2560, batch = 64;
  const Result r =
      Oar("launch --pservers 2 --trainers 2 --model fashion_mlp --epochs 1 --limit " + std::to_string(examples) +
          " --batch_size " + std::to_string(batch) + " --metrics --metrics_dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("oar launch: metrics: pserver.0 http://127.0.0.1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trainer 1: metrics at http://127.0.0.1:"), std::string::npos) << r.out;

  std::map<std::string, double> t[2], p[2];
  for (int i = 0; i < 2; ++i) {
    t[i] = Samples(dir + "/trainer." + std::to_string(i) + ".prom");
    p[i] = Samples(dir + "/pserver." + std::to_string(i) + ".prom");
  }
  // Each trainer trains on its half of every global batch.
  const double steps = static_cast<double>(examples / batch);
  EXPECT_EQ(t[0]["oar_trainer_examples_total"] + t[1]["oar_trainer_examples_total"], examples);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(t[i]["oar_trainer_steps_total"], steps) << "trainer " << i;
    EXPECT_EQ(t[i]["oar_trainer_step_duration_seconds_count"], steps) << "trainer " << i;
    EXPECT_GT(t[i]["oar_trainer_step_duration_seconds_sum"], 0) << "trainer " << i;
    EXPECT_EQ(p[i]["oar_pserver_steps_total"], steps) << "pserver " << i;
    EXPECT_EQ(p[i]["oar_pserver_requests_total{method=\"BatchBarrier\"}"], 2 * steps) << "pserver " << i;
    EXPECT_GT(p[i]["oar_pserver_parameter_bytes"], 0) << "pserver " << i;
    EXPECT_GT(p[i]["process_resident_memory_bytes"], 0) << "pserver " << i;
  }
  // Trainer i's gradient bytes to the two pservers are the two pservers'
  // bytes from trainer i (the pairing by endpoint aside).
  for (int i = 0; i < 2; ++i) {
    const std::vector<double> sent = ValuesOf(t[i], "oar_rpc_client_sent_bytes_total{method=\"SendVariable\"");
    const std::string key = "oar_pserver_received_bytes_total{trainer=\"" + std::to_string(i) + "\"}";
    std::vector<double> received = {p[0][key], p[1][key]};
    std::sort(received.begin(), received.end());
    EXPECT_EQ(sent, received) << "trainer " << i;
    EXPECT_GT(received[0], 0) << "trainer " << i;
  }
  // On one host the job runs over shared memory, where a sync pserver lends
  // its parameters: every Get is answered with where the value lies, so
  // each pserver lent exactly the bytes the trainers received from it. (A
  // parameter that left the region — an optimizer that reallocated it —
  // would be copied instead: correct, but the loan lost, and this fails.)
  std::map<std::string, double> from_peer;
  for (int i = 0; i < 2; ++i) {
    for (const auto& [k, v] : t[i]) {
      if (k.rfind("oar_rpc_client_received_bytes_total{method=\"GetVariable\"", 0) == 0) from_peer[k] += v;
    }
  }
  std::vector<double> pulled, lent = {p[0]["oar_rpc_server_lent_bytes_total"], p[1]["oar_rpc_server_lent_bytes_total"]};
  for (const auto& [peer, bytes] : from_peer) pulled.push_back(bytes);
  std::sort(pulled.begin(), pulled.end());
  std::sort(lent.begin(), lent.end());
  EXPECT_EQ(lent, pulled);
  EXPECT_GT(lent[0], 0);
  // Each step's recv ops bring the slices of the two weights split across
  // the pservers (fc_0.w_0 784 x 256, fc_1.w_0 256 x 128 floats): those,
  // and only those, are read where they lie. The parameters pulled whole
  // (the biases, fc_2.w_0 below the minimum block) and the startup's pull
  // are copied.
  const double slice_bytes = (784.0 * 256 + 256.0 * 128) * sizeof(float);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(t[i]["oar_rpc_client_viewed_bytes_total"], steps * slice_bytes) << "trainer " << i;
  }
  // The other way, every gradient goes as where it lies in the memory its
  // trainer lends the pserver (a sync pserver takes the loan): the trainers
  // lent exactly the payload bytes they sent, and the pservers read that
  // many in place. (A gradient sent through the ring would make the first
  // figure smaller than the second. Nothing is retried in this job: the
  // sent bytes count calls, the lent bytes attempts.)
  double sent = 0, lent_sends = 0;
  for (int i = 0; i < 2; ++i) {
    for (const auto& [k, v] : t[i]) {
      if (k.rfind("oar_rpc_client_sent_bytes_total{method=\"SendVariable\"", 0) == 0) sent += v;
    }
    lent_sends += t[i]["oar_rpc_client_lent_bytes_total"];
  }
  EXPECT_GT(sent, 0);
  EXPECT_EQ(lent_sends, sent);
  EXPECT_EQ(p[0]["oar_rpc_server_viewed_bytes_total"] + p[1]["oar_rpc_server_viewed_bytes_total"], lent_sends);
  // The launcher's time split, from the same files: the parts add up to
  // the step time, and a sync trainer both sends and waits at barriers.
  for (int i = 0; i < 2; ++i) {
    const std::string key = "\n  trainer " + std::to_string(i) + ": ";  // the summary line
    const size_t at = r.out.find(key);
    ASSERT_NE(at, std::string::npos) << r.out;
    double step = 0, compute = 0, send = 0, barrier = 0, receive = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at + key.size(),
                          "%lf s of steps = compute %lf s, send %lf s, barrier wait %lf s, receive %lf s", &step,
                          &compute, &send, &barrier, &receive),
              5)
        << r.out.substr(at, 200);
    EXPECT_NEAR(compute + send + barrier + receive, step, 0.021) << r.out.substr(at, 200);  // printed to 0.01
    EXPECT_NEAR(step, t[i]["oar_trainer_step_duration_seconds_sum"], 0.006);
    EXPECT_GT(send + barrier + receive, 0) << r.out.substr(at, 200);
  }
  EXPECT_NE(r.out.find("pserver 0: optimize "), std::string::npos) << r.out;
  OAR_NEED_TOOL(RunCommand("promtool --version").code == 0, "promtool (Debian's prometheus)");
  for (const char* f : {"trainer.0", "trainer.1", "pserver.0", "pserver.1"}) {
    const Result check = RunCommand("promtool check metrics < " + dir + "/" + f + ".prom");
    EXPECT_EQ(check.code, 0) << f << ": " << check.out;
    EXPECT_EQ(check.out, "") << f << ": " << check.out;
  }
}

// An nccl2 job's trainers count the wall time of their all-reduces across
// trainers, and the launcher's summary reports it beside the step time.
TEST(MetricsE2eTest, Nccl2TrainersReportTheirAllReduceTime) {
  const std::string dir = TempDir("metrics_e2e_nccl2");
  const int64_t examples = 1280, batch = 64;
  const Result r =
      Oar("launch --mode nccl2 --trainers 2 --model fashion_mlp --epochs 1 --limit " + std::to_string(examples) +
          " --batch_size " + std::to_string(batch) + " --metrics --metrics_dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  for (int i = 0; i < 2; ++i) {
    auto t = Samples(dir + "/trainer." + std::to_string(i) + ".prom");
    EXPECT_EQ(t["oar_trainer_steps_total"], static_cast<double>(examples / batch)) << "trainer " << i;
    const double collective = t["oar_trainer_collective_seconds_total"];
    EXPECT_GT(collective, 0) << "trainer " << i;
    const std::string key = "\n  trainer " + std::to_string(i) + ": ";  // the summary line
    const size_t at = r.out.find(key);
    ASSERT_NE(at, std::string::npos) << r.out;
    double step = 0, all_reduce = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at + key.size(), "%lf s of steps, all-reduce across trainers %lf s", &step,
                          &all_reduce),
              2)
        << r.out.substr(at, 200);
    EXPECT_NEAR(step, t["oar_trainer_step_duration_seconds_sum"], 0.006);
    EXPECT_NEAR(all_reduce, collective, 0.006);
  }
}

}  // namespace
}  // namespace oar
