// Elastic nccl2 end to end (issue 53's test of the mode), through
// `oar launch --elastic --mode nccl2` with a real etcd-server:
//  - 3 trainers on fashion_mlp; trainer 1 is SIGKILLed mid-epoch and a new
//    trainer 1 is added later. The job finishes and learns.
//  - The survivors' ring after the kill restarts from a commit; that
//    commit (written to --checkpoint_dir and kept, as a resize restored
//    from it) starts a fresh 2-trainer job, whose every loss up to the next
//    resize equals the elastic job's within 1e-6 — the resize changed
//    nothing a fresh job of the new size would not do.
//  - From the trainers' logs, the job's effective steps (each ring's, from
//    the commit it restored to the next ring's) cover each epoch's examples
//    once, in order, n x b at a time, with fewer than n x b left over.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

constexpr int kBatch = 32, kLimit = 6144, kEpochs = 3, kCommitEvery = 10;

struct RingStep {
  int64_t ring = 0;
  int rank = 0, size = 0;
  int64_t step = 0, epoch = 0, offset = 0;
  double loss = 0;
};

struct Ring {
  int64_t ring = 0;
  int size = 0;
  int64_t step = 0, epoch = 0, offset = 0;
};

struct JobLog {
  std::map<int64_t, Ring> rings;
  std::vector<RingStep> steps;  // every trainer's, in each log's order
  std::string text;
};

JobLog ParseLogs(const std::string& dir) {
  static const std::regex ring(R"(@oar ring trainer=\d+ ring=(\d+) rank=\d+ size=(\d+) trainers=\S+ step=(\d+) )"
                               R"(epoch=(\d+) offset=(\d+))");
  static const std::regex step(R"(@oar ring-step trainer=\d+ ring=(\d+) rank=(\d+) size=(\d+) step=(\d+) )"
                               R"(epoch=(\d+) offset=(\d+) loss=(\S+))");
  JobLog out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("trainer.", 0) != 0) continue;
    std::ifstream in(e.path());
    std::string line;
    while (std::getline(in, line)) {
      out.text += line + "\n";
      std::smatch m;
      if (std::regex_search(line, m, ring)) {
        out.rings[std::stoll(m[1])] = {.ring = std::stoll(m[1]),
                                       .size = std::stoi(m[2]),
                                       .step = std::stoll(m[3]),
                                       .epoch = std::stoll(m[4]),
                                       .offset = std::stoll(m[5])};
      } else if (std::regex_search(line, m, step)) {
        out.steps.push_back({.ring = std::stoll(m[1]),
                             .rank = std::stoi(m[2]),
                             .size = std::stoi(m[3]),
                             .step = std::stoll(m[4]),
                             .epoch = std::stoll(m[5]),
                             .offset = std::stoll(m[6]),
                             .loss = std::stod(m[7])});
      }
    }
  }
  return out;
}

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string Common() {
  return absl::StrCat(" --model fashion_mlp --optimizer sgd --lr 0.05 --epochs ", kEpochs, " --limit ", kLimit,
                      " --seed 3 --rpc_deadline 4000 --elastic_commit_every ", kCommitEvery, " --mode nccl2");
}
std::string Common(int cpu_num) { return absl::StrCat(Common(), " --cpu_num ", cpu_num); }

// The kill-and-add job and its fresh twin, each trainer on `cpu_num` CPU
// places (its batch split among them, every ring's executor copying the
// restored commit to each).
void ExpectSurvivorsGoOnAsAFreshJob(int cpu_num) {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const std::string logs = TempDir("elastic_ring_logs"), commits = TempDir("elastic_ring_commits");
  const std::string metrics = TempDir("elastic_ring_metrics");
  Result job =
      Oar(absl::StrCat("launch --elastic --trainers 2:3 --batch_size ", 3 * kBatch, Common(cpu_num),
                       " --job_id ring_a --checkpoint_dir ", commits, " --log_dir ", logs, " --metrics --metrics_dir ",
                       metrics, " --chaos 'kill trainer 1 at step 200; add 1 at step 300'"));
  ASSERT_EQ(job.code, 0) << job.out;
  EXPECT_GT(ValueAfter(job.out, "test_accuracy="), 0.7) << job.out;
  const JobLog a = ParseLogs(logs);
  // Mid-step or in a commit's all-reduce, as the kill fell.
  ASSERT_NE(a.text.find(" broke at "), std::string::npos) << "no survivor saw its ring break\n" << a.text;

  // The rings: 3 trainers, then the 2 survivors, then 3 again.
  std::vector<Ring> rings;
  for (const auto& [n, r] : a.rings) rings.push_back(r);
  ASSERT_GE(rings.size(), 3u) << job.out;
  size_t two = 0;
  while (two < rings.size() && rings[two].size != 2) ++two;
  ASSERT_LT(two, rings.size()) << "no ring of the 2 survivors\n" << job.out;
  ASSERT_GT(rings[two].step, 0);
  const int64_t from = rings[two].step;
  const int64_t until = two + 1 < rings.size() ? rings[two + 1].step : -1;
  ASSERT_GT(until, from) << "the added trainer never entered a ring\n" << job.out;

  // Each ring's effective steps: from its commit to the next ring's.
  std::map<int64_t, std::map<int, RingStep>> effective;  // step -> rank -> what was trained
  for (size_t i = 0; i < rings.size(); ++i) {
    const int64_t end = i + 1 < rings.size() ? rings[i + 1].step : INT64_MAX;
    for (const RingStep& s : a.steps) {
      if (s.ring == rings[i].ring && s.step > rings[i].step && s.step <= end) effective[s.step][s.rank] = s;
    }
  }
  // Every step of the job once, its ranks all there, its examples next in
  // the epoch; each epoch's leftover fewer than a step's.
  // A ring broken in the commit after step C keeps step C, whose all-reduce
  // the killed trainer took part in; it may have died before logging it.
  std::smatch at_commit;
  const int64_t commit_break = std::regex_search(a.text, at_commit, std::regex(R"(broke at the commit of step (\d+))"))
                                   ? std::stoll(at_commit[1])
                                   : -1;
  int64_t epoch = 1, offset = 0, step = 0;
  for (const auto& [s, ranks] : effective) {
    ASSERT_EQ(s, step + 1) << "step " << step + 1 << " was never trained (or not by the ring that kept it)";
    step = s;
    const RingStep& r0 = ranks.begin()->second;
    const bool unlogged = s == commit_break && static_cast<int>(ranks.size()) == r0.size - 1;
    if (!unlogged) ASSERT_EQ(static_cast<int>(ranks.size()), r0.size) << "step " << s << " lacks a rank";
    const int64_t width = static_cast<int64_t>(r0.size) * kBatch;
    if (r0.epoch != epoch) {
      EXPECT_LT(kLimit - offset, width) << "epoch " << epoch << " left a whole step untrained";
      EXPECT_EQ(r0.epoch, epoch + 1);
      epoch = r0.epoch;
      offset = 0;
    }
    EXPECT_EQ(r0.offset, offset + width) << "step " << s;
    offset = r0.offset;
  }
  EXPECT_EQ(epoch, kEpochs);
  EXPECT_LT(kLimit - offset, 3 * kBatch);

  // Trainer 0's metrics: three rings, and, when its ring broke mid-step,
  // one rollback of the steps between its last commit and the break (what
  // its log says); broken in a commit's all-reduce, it had nothing to undo.
  std::ifstream prom(metrics + "/trainer.0.prom");
  const std::string text((std::istreambuf_iterator<char>(prom)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(absl::StrCat("oar_trainer_elastic_rings_total ", rings.size())), std::string::npos) << text;
  std::smatch broke;
  const std::string t0 = ReadLog(logs + "/trainer.0.log");
  if (std::regex_search(t0, broke, std::regex(R"(broke at step (\d+) .*back to the commit of step (\d+))"))) {
    EXPECT_NE(text.find("oar_trainer_elastic_rollbacks_total 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find(absl::StrCat("oar_trainer_elastic_steps_rolled_back_total ",
                                     std::stoll(broke[1]) - 1 - std::stoll(broke[2]))),
              std::string::npos)
        << text;
  } else {
    ASSERT_NE(t0.find("broke at the commit of step"), std::string::npos) << t0;
    EXPECT_EQ(text.find("oar_trainer_elastic_rollbacks_total 1"), std::string::npos) << text;
  }

  // A fresh 2-trainer job from the commit the survivors restored.
  const std::string commit = absl::StrCat(commits, "/step-", from);
  ASSERT_TRUE(std::filesystem::exists(commit + "/position")) << commit << " was not kept\n" << job.out;
  const std::string fresh_dir = TempDir("elastic_ring_fresh"), fresh_logs = TempDir("elastic_ring_fresh_logs");
  std::filesystem::copy(commit, absl::StrCat(fresh_dir, "/step-", from), std::filesystem::copy_options::recursive);
  // --batch_size is per slot: 2 slots of kBatch, as the elastic job's 3.
  Result fresh = Oar(absl::StrCat("launch --elastic --trainers 2:2 --batch_size ", 2 * kBatch, Common(cpu_num),
                                  " --job_id ring_b --checkpoint_dir ", fresh_dir, " --log_dir ", fresh_logs,
                                  " --max_steps ", until));
  ASSERT_EQ(fresh.code, 0) << fresh.out;
  const JobLog b = ParseLogs(fresh_logs);
  int compared = 0;
  double worst = 0;
  for (const RingStep& s : b.steps) {
    ASSERT_GT(s.step, from);
    ASSERT_LE(s.step, until);
    ASSERT_EQ(s.size, 2);
    const auto it = effective.find(s.step);
    ASSERT_NE(it, effective.end());
    ASSERT_TRUE(it->second.contains(s.rank));
    const RingStep& theirs = it->second.at(s.rank);
    EXPECT_EQ(theirs.offset, s.offset) << "step " << s.step;
    worst = std::max(worst, std::abs(theirs.loss - s.loss));
    EXPECT_NEAR(theirs.loss, s.loss, 1e-6) << "step " << s.step << " rank " << s.rank;
    ++compared;
  }
  EXPECT_EQ(compared, 2 * (until - from)) << fresh.out;
  std::printf("compared %d losses of steps %lld..%lld with a fresh job (%d place(s) a trainer): max |diff| %.3g\n",
              compared, static_cast<long long>(from + 1), static_cast<long long>(until), cpu_num, worst);
}

TEST(ElasticRingE2eTest, SurvivorsGoOnFromTheirCommitAsAFreshJobOfTheirSizeWouldAndEveryExampleCountsOnce) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ExpectSurvivorsGoOnAsAFreshJob(1);
}

TEST(ElasticRingE2eTest, TrainersOfSeveralPlacesGoOnFromTheirCommitAsAFreshJobWould) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ExpectSurvivorsGoOnAsAFreshJob(2);
}

// `oar launch` on a thread of its own, against the test's etcd-server.
class LaunchedJob {
 public:
  explicit LaunchedJob(std::string args) {
    thread_ = std::thread([this, args] { result_ = Oar(args); });
  }
  ~LaunchedJob() {
    if (thread_.joinable()) thread_.join();
  }
  Result Wait() {
    thread_.join();
    return result_;
  }

 private:
  std::thread thread_;
  Result result_;
};

// Waits (up to 60 s) until `log` holds `n` lines holding `text`.
bool AwaitLines(const std::string& log, const std::string& text, int n) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(log);
    std::string line;
    int seen = 0;
    while (std::getline(in, line)) seen += line.find(text) != std::string::npos ? 1 : 0;
    if (seen >= n) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// The process of `trainer` in `job`, from its member entry ("host pid N").
pid_t TrainerPid(elastic::EtcdClient* etcd, const std::string& job, int trainer) {
  auto got = etcd->Get(absl::StrCat("/oar/", job, "/members/trainer/", trainer));
  if (!got.ok() || got->kvs.empty()) return -1;
  const std::string& v = got->kvs[0].value;
  int pid = -1;
  const size_t at = v.rfind(' ');
  return at != std::string::npos && absl::SimpleAtoi(v.substr(at + 1), &pid) ? pid : -1;
}

// The effective steps cover every epoch once (see the first test).
void ExpectEveryExampleOnce(const JobLog& log, int64_t batch, int64_t limit, int epochs) {
  std::vector<Ring> rings;
  for (const auto& [n, r] : log.rings) rings.push_back(r);
  std::map<int64_t, RingStep> effective;
  for (size_t i = 0; i < rings.size(); ++i) {
    const int64_t end = i + 1 < rings.size() ? rings[i + 1].step : INT64_MAX;
    for (const RingStep& s : log.steps) {
      if (s.ring == rings[i].ring && s.step > rings[i].step && s.step <= end && s.rank == 0) effective[s.step] = s;
    }
  }
  int64_t epoch = 1, offset = 0, step = 0;
  for (const auto& [n, s] : effective) {
    ASSERT_EQ(n, step + 1) << "step " << step + 1 << " was never trained by the ring that kept it";
    step = n;
    if (s.epoch != epoch) {
      EXPECT_LT(limit - offset, s.size * batch);
      epoch = s.epoch;
      offset = 0;
    }
    EXPECT_EQ(s.offset, offset + s.size * batch) << "step " << n;
    offset = s.offset;
  }
  EXPECT_EQ(epoch, epochs);
}

// etcd SIGKILLed mid-job and started again 1.5 s later (within the
// lease): the trainers train on (they call etcd only at a ring's forming),
// nobody leaves, and the job finishes with every example once.
TEST(ElasticRingE2eTest, AJobKeepsTrainingThroughAnEtcdRestart) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  auto etcd = EtcdServer::Start();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string logs = TempDir("elastic_ring_etcd_logs");
  LaunchedJob job(absl::StrCat("launch --elastic --trainers 2:2 --batch_size ", 2 * kBatch, Common(),
                               " --job_id ring_etcd --elastic_server ", (*etcd)->url(), " --log_dir ", logs,
                               " --limit 0 --epochs 1"));
  ASSERT_TRUE(AwaitLines(logs + "/trainer.0.log", "@oar ring-step", 30));
  (*etcd)->Kill();
  absl::SleepFor(absl::Milliseconds(1500));
  ASSERT_TRUE((*etcd)->Restart().ok());
  const Result r = job.Wait();
  ASSERT_EQ(r.code, 0) << r.out;
  const JobLog log = ParseLogs(logs);
  EXPECT_EQ(log.rings.size(), 1u) << r.out;
  EXPECT_NO_FATAL_FAILURE(ExpectEveryExampleOnce(log, kBatch, 60000, 1));
}

// A 2:3 job (2 s leases) whose trainer 1 is SIGSTOPped once it steps.
struct StoppedJob {
  std::unique_ptr<EtcdServer> etcd;
  std::unique_ptr<elastic::EtcdClient> client;
  std::string logs;
  std::unique_ptr<LaunchedJob> job;
  pid_t stopped = -1;
  int64_t lease = 0;  // its entry's

  void Start(const std::string& job_id) {
    OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
    auto server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    etcd = std::move(*server);
    auto c = elastic::EtcdClient::Connect(etcd->url(), absl::Seconds(5));
    ASSERT_TRUE(c.ok());
    client = std::move(*c);
    logs = TempDir("elastic_ring_" + job_id);
    job = std::make_unique<LaunchedJob>(absl::StrCat("launch --elastic --trainers 2:3 --batch_size ", 3 * kBatch,
                                                     Common(), " --job_id ", job_id, " --elastic_server ", etcd->url(),
                                                     " --log_dir ", logs, " --limit 0 --epochs 1 --rpc_deadline 2000"));
    ASSERT_TRUE(AwaitLines(logs + "/trainer.1.log", "@oar ring-step", 30));
    stopped = TrainerPid(client.get(), job_id, 1);
    ASSERT_GT(stopped, 0);
    const auto entry = client->Get(absl::StrCat("/oar/", job_id, "/members/trainer/1"));
    ASSERT_TRUE(entry.ok() && !entry->kvs.empty());
    lease = entry->kvs[0].lease;
    ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  }
  // Whether trainers 0 and 2 formed a ring without it (60 s at most).
  bool LeftOut() const { return AwaitLines(logs + "/trainer.0.log", "trainers=0,2 ", 1); }
  // Once it was woken: the job ends well, its rings were of 3 trainers,
  // then of the 2 others (only it left out), and at last of 3 again (it
  // came back); every example counts once.
  JobLog ExpectOnlyItLeftOutAndBack(Result* r) {
    *r = job->Wait();
    EXPECT_EQ(r->code, 0) << r->out;
    const JobLog log = ParseLogs(logs);
    std::vector<Ring> rings;
    for (const auto& [n, ring] : log.rings) rings.push_back(ring);
    EXPECT_GE(rings.size(), 2u);
    if (rings.size() < 2) return log;
    EXPECT_EQ(rings[0].size, 3);
    EXPECT_EQ(rings[1].size, 2) << "more than trainer 1 was left out\n" << r->out;
    EXPECT_EQ(rings.back().size, 3) << "trainer 1 never came back\n" << r->out;
    EXPECT_NO_FATAL_FAILURE(ExpectEveryExampleOnce(log, kBatch, 60000, 1));
    return log;
  }
};

// A trainer stopped (SIGSTOP: hung, or cut off) for longer than its lease
// is left out: the others' all-reduce times out, they roll back and form a
// ring without it. Woken, it finds its ring gone and enters the job again
// at a commit. The job finishes with every example once.
TEST(ElasticRingE2eTest, ATrainerStoppedPastItsLeaseIsLeftOutAndOnlyItThenComesBack) {
  StoppedJob j;
  ASSERT_NO_FATAL_FAILURE(j.Start("ring_stop"));
  const bool left_out = j.LeftOut();
  ::kill(j.stopped, SIGCONT);
  ASSERT_TRUE(left_out) << "no ring of trainers 0 and 2";
  Result r;
  j.ExpectOnlyItLeftOutAndBack(&r);
}

// A trainer stuck with its lease renewed (SIGSTOPped while the test renews
// its lease, as a hung trainer's own renewing thread would): the others'
// ring breaks, and they revoke its lease and go on without it — at once
// when their shared-memory collective timed out on it (it names the late
// rank), else after waiting for it at the next ring's rendezvous for the
// lease's TTL. Before, they waited for a lease that never ran out and the
// job stopped. Woken, it registers again and enters at a commit; every
// example counts once.
TEST(ElasticRingE2eTest, ATrainerStuckWithItsLeaseRenewedIsTakenOutAndComesBackWhenItWakes) {
  StoppedJob j;
  ASSERT_NO_FATAL_FAILURE(j.Start("ring_stuck"));
  // Renewed every 300 ms until it is gone: gone within 1.5 s of a renewal
  // (its TTL is 2 s) means revoked, not run out.
  std::atomic<bool> stop_renewing = false, revoked = false;
  std::thread renew([&] {
    absl::Time renewed = absl::Now();
    const absl::Time until = renewed + absl::Seconds(60);
    while (!stop_renewing && absl::Now() < until) {
      const absl::Status s = j.client->KeepAlive(j.lease);
      if (!s.ok()) {
        revoked = absl::IsNotFound(s) && absl::Now() - renewed < absl::Milliseconds(1500);
        return;
      }
      renewed = absl::Now();
      absl::SleepFor(absl::Milliseconds(300));
    }
  });
  const bool left_out = j.LeftOut();
  if (!left_out) stop_renewing = true;
  renew.join();
  ::kill(j.stopped, SIGCONT);
  ASSERT_TRUE(left_out) << "no ring of trainers 0 and 2";
  EXPECT_TRUE(revoked) << "its lease ran out instead of being revoked";
  Result r;
  const JobLog log = j.ExpectOnlyItLeftOutAndBack(&r);
  EXPECT_NE(log.text.find(": trainer 1 ("), std::string::npos) << log.text;
  EXPECT_NE(log.text.find("it is lost or stuck; taking it out of the job"), std::string::npos) << log.text;
  if (r.out.find("collective=shm") != std::string::npos) {  // one host: the ring's own wait named it
    EXPECT_NE(log.text.find("did not come to that ring's collective within its timeout"), std::string::npos)
        << log.text;
  }
}

}  // namespace
}  // namespace oar
