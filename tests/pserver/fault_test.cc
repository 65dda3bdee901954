// The fault suite on every transport (in-process, and on loopback gRPC, the
// TCP stream and shared memory): a 2 pservers x 2 trainers
// job (transpiled, run through the same ParameterServer and executors as a
// real one) whose trainers' calls are dropped, answered-then-lost (so the
// retry is a duplicate), duplicated, delayed and reordered by a seeded
// schedule. Sync: every loss and every final parameter equals the
// fault-free run's, bit for bit. Async: every gradient was applied exactly
// once. Injected failures end the job with errors naming the endpoint and
// the variable.
#include <cstring>
#include <regex>

#include "gtest/gtest.h"
#include "tests/util/inproc_job.h"

namespace oar {
namespace {

struct Fault {
  const char* name;
  const char* spec;
  int64_t rpc::FaultStats::*counted;
};

const Fault kFaults[] = {
    {"drop_request", "seed=11,drop_request=0.15", &rpc::FaultStats::dropped_requests},
    {"drop_reply", "seed=12,drop_reply=0.15", &rpc::FaultStats::dropped_replies},
    {"duplicate", "seed=13,duplicate=0.3,max_delay_ms=10", &rpc::FaultStats::duplicated},
    {"delay", "seed=14,delay=0.4,max_delay_ms=15", &rpc::FaultStats::delayed},
    {"reorder", "seed=15,reorder=0.3,max_delay_ms=15", &rpc::FaultStats::reordered},
    {"all", "seed=16,drop_request=0.05,drop_reply=0.05,duplicate=0.1,delay=0.1,reorder=0.1,max_delay_ms=10",
     &rpc::FaultStats::calls},
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The fault-free in-process run: what every transport must reproduce.
const JobResult& Clean(bool sync) {
  static std::map<bool, JobResult> runs;
  auto it = runs.find(sync);
  if (it == runs.end()) {
    JobSpec spec;
    spec.sync = sync;
    it = runs.emplace(sync, RunJob(spec)).first;
  }
  return it->second;
}

class FaultTest : public ::testing::TestWithParam<std::tuple<Fault, bool, const char*>> {};

TEST_P(FaultTest, TheJobEndsAsWithoutFaults) {
  const auto& [fault, sync, wire] = GetParam();
  const JobResult& clean = Clean(sync);
  ASSERT_TRUE(clean.ok()) << clean.Errors();
  JobSpec spec;
  spec.sync = sync;
  spec.wire = wire;
  spec.faults = *rpc::FaultSpec::Parse(fault.spec);
  const JobResult r = RunJob(spec);
  ASSERT_TRUE(r.ok()) << r.Errors() << r.faults.ToString();
  EXPECT_GT(r.faults.*fault.counted, 0) << "no fault was injected: " << r.faults.ToString();
  int64_t applied = 0, duplicates = 0;
  for (const auto& s : r.pserver_stats) {
    applied += s.gradients_applied;
    duplicates += s.duplicates;
  }
  // Each trainer's every gradient block, once: no more (a duplicate applied
  // twice), no fewer.
  EXPECT_EQ(applied, 2 * 10 * r.grad_blocks);
  if (std::string(fault.name) == "drop_reply" || std::string(fault.name) == "duplicate") {
    EXPECT_GT(duplicates, 0) << "the pservers saw no duplicate to answer";
  }
  if (!sync) return;  // async: the order of updates is the threads' to choose
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(SameBits(r.losses[t], clean.losses[t])) << "trainer " << t << " losses differ";
    for (const auto& p : JobParams()) EXPECT_TRUE(SameBits(r.final[t].at(p), clean.final[t].at(p))) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultTest,
                         ::testing::Combine(::testing::ValuesIn(kFaults), ::testing::Bool(),
                                            ::testing::Values("inprocess", "tcp", "shm")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_sync_" : "_async_") + std::get<2>(info.param);
                         });

TEST(FaultTest, InjectedFailuresEndTheJobNamingEndpointAndVariable) {
  JobSpec spec;
  spec.deadline_ms = 3000;
  spec.faults = *rpc::FaultSpec::Parse("seed=21,fail=0.2");
  const JobResult r = RunJob(spec);
  EXPECT_GT(r.faults.failed, 0);
  // A trainer hit by the fault fails with it, named; its peer may instead end
  // on what that failure does to the step (on a loaded machine, its own
  // deadline at the barrier): that is the job ending too, not hanging.
  // "injected fault: <call> '<variable>' to <endpoint>": the variable is one
  // of the job's (a parameter, its gradient or a block of either) or a
  // control message (BATCH_BARRIER@RECV, ...), never empty.
  bool named = false;
  const std::regex form("injected fault: [A-Za-z]+ '([^']+)' to 127\\.0\\.0\\.1:71");
  for (const auto& s : r.trainer_status) {
    if (s.ok() || s.code() != absl::StatusCode::kInternal) continue;
    const std::string message(s.message());
    std::smatch m;
    if (!std::regex_search(message, m, form)) continue;
    const std::string var = m[1];
    bool known = var.size() > 5 && var.substr(var.size() - 5) == "@RECV";
    for (const auto& p : JobParams()) known |= var.rfind(p, 0) == 0;
    EXPECT_TRUE(known) << "'" << var << "' is not a variable of the job: " << message;
    named |= known;
  }
  EXPECT_TRUE(named) << r.Errors();
}

// The same job over gRPC on loopback, with replies lost and duplicates:
// the transport-independent guarantees hold on the real wire too.
TEST(FaultTest, OverGrpcWithLostRepliesAndDuplicatesTheSyncJobIsExact) {
  JobSpec spec;
  spec.wire = "grpc";
  spec.faults = *rpc::FaultSpec::Parse("seed=31,drop_reply=0.1,duplicate=0.1,max_delay_ms=10");
  const JobResult r = RunJob(spec);
  ASSERT_TRUE(r.ok()) << r.Errors();
  const JobResult& clean = Clean(true);
  for (int t = 0; t < 2; ++t) {
    for (const auto& p : JobParams()) EXPECT_TRUE(SameBits(r.final[t].at(p), clean.final[t].at(p))) << p;
  }
  EXPECT_GT(r.faults.dropped_replies + r.faults.duplicated, 0);
}

}  // namespace
}  // namespace oar
