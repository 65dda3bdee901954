// Elastic async pserver jobs end to end, with a real etcd-server on
// loopback: `oar run` processes as Kubernetes runs them (PADDLE_* and
// --elastic_server), a trainer SIGKILLed mid-epoch and another started
// later. The job finishes; every chunk of every epoch was trained exactly
// once (from the trainers' "@oar chunk" lines), the killed trainer's
// unfinished chunk by another; the pserver names the leave and the join.
#include <signal.h>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/process_group.h"
#include "cli/trainer_failure.h"
#include "common/elastic/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/listen_socket.h"
#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

constexpr int kChunks = 12, kEpochs = 2;

// One process of the job in a group of its own (so a test may add one).
struct Proc {
  cli::ProcessGroup group;
  std::optional<int> code;
};

struct ElasticJob {
  bool sync = false;  // the job's mode: async unless set before StartJob
  int rpc_deadline_ms = 4000;
  std::unique_ptr<EtcdServer> etcd;
  HandedSocket socket = ListenForChild();
  const std::string dir = TempDir("elastic");
  absl::Mutex mu;
  std::map<std::string, std::vector<std::string>> logs ABSL_GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<Proc>> procs;
  std::map<std::string, std::vector<std::string>> more_args;  // a process's own flags, by name

  std::vector<std::string> Args() const {
    return {OarBinary(),
            "run",
            "--model=fashion_mlp",
            sync ? "--sync" : "--async",
            "--epochs=2",
            "--limit=20000",
            "--batch_size=64",
            "--rpc_deadline=" + std::to_string(rpc_deadline_ms),
            "--job_id=e2e",
            "--elastic_chunks=" + std::to_string(kChunks),
            "--elastic_server=" + etcd->url()};
  }
  void Start(const std::string& name, std::vector<std::pair<std::string, std::string>> env, std::vector<int> fds) {
    env.push_back({"PADDLE_TRAINERS_NUM", "4"});
    env.push_back({"PADDLE_PSERVER_ENDPOINTS", socket.endpoint()});
    auto args = Args();
    args.push_back("--metrics_file=" + dir + "/" + name + ".prom");
    if (name != "pserver") args.push_back("--report");
    for (const std::string& a : more_args[name]) args.push_back(a);
    auto p = std::make_unique<Proc>();
    ASSERT_TRUE(p->group
                    .Start({{name, args, env, {}, fds}},
                           [this, name](size_t, const std::string& line, bool) {
                             absl::MutexLock l(&mu);
                             logs[name].push_back(line);
                           })
                    .ok());
    procs[name] = std::move(p);
  }
  void StartTrainer(int id) {
    Start("trainer." + std::to_string(id),
          {{"PADDLE_TRAINING_ROLE", "TRAINER"}, {"PADDLE_TRAINER_ID", std::to_string(id)}}, {});
  }
  std::string Log(const std::string& name) {
    absl::MutexLock l(&mu);
    std::string out;
    for (const auto& line : logs[name]) out += line + "\n";
    return out;
  }
  // Waits until `holds` of the logs or `seconds` pass.
  bool Await(const std::function<bool(const std::map<std::string, std::vector<std::string>>&)>& holds, int seconds) {
    absl::MutexLock l(&mu);
    auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return holds(logs); };
    return mu.AwaitWithTimeout(absl::Condition(&held), absl::Seconds(seconds));
  }
  // A real etcd, the pserver and trainers `ids`.
  void StartJob(const std::vector<int>& ids) {
    auto server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    etcd = std::move(*server);
    Start("pserver", {{"PADDLE_TRAINING_ROLE", "PSERVER"}, {"PADDLE_CURRENT_ENDPOINT", socket.endpoint()}},
          {socket.fd});
    for (int t : ids) StartTrainer(t);
  }
  // Until process `name` wrote a line starting with `prefix` (60 s at most).
  bool AwaitLine(const std::string& name, const std::string& prefix) {
    return Await(
        [&](const auto& logs) {
          auto it = logs.find(name);
          if (it == logs.end()) return false;
          for (const auto& l : it->second) {
            if (l.rfind(prefix, 0) == 0) return true;
          }
          return false;
        },
        60);
  }
  // Until the pserver wrote a line holding `text`, or `seconds` pass.
  bool AwaitPserverSays(const std::string& text, int seconds) {
    return Await(
        [&](const auto& logs) {
          auto it = logs.find("pserver");
          if (it == logs.end()) return false;
          for (const auto& l : it->second) {
            if (l.find(text) != std::string::npos) return true;
          }
          return false;
        },
        seconds);
  }
  // (epoch, chunk) -> the processes whose "@oar chunk" lines say they trained it.
  std::map<std::pair<int, int>, std::vector<std::string>> Trained(const std::vector<std::string>& names) {
    std::map<std::pair<int, int>, std::vector<std::string>> trained;
    for (const std::string& name : names) {
      for (const std::string& line : std::vector<std::string>(absl::StrSplit(Log(name), '\n'))) {
        if (line.rfind("@oar chunk ", 0) != 0) continue;
        int epoch = -1, chunk = -1;
        for (absl::string_view kv : absl::StrSplit(line.substr(11), ' ')) {
          if (absl::ConsumePrefix(&kv, "epoch=")) (void)absl::SimpleAtoi(kv, &epoch);
          if (absl::ConsumePrefix(&kv, "chunk=")) (void)absl::SimpleAtoi(kv, &chunk);
        }
        trained[{epoch, chunk}].push_back(name);
      }
    }
    return trained;
  }
  void WaitAll(int seconds) {
    const absl::Time until = absl::Now() + absl::Seconds(seconds);
    for (auto& [name, p] : procs) {
      while (!p->code && absl::Now() < until) {
        for (const auto& e : p->group.Poll()) p->code = e.code;
        if (!p->code) absl::SleepFor(absl::Milliseconds(50));
      }
      p->group.DrainOutput();
    }
  }
};

TEST(ElasticE2eTest, AnAsyncJobOutlivesAKilledTrainerTakesAJoinerAndTrainsEveryChunkOnce) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  ASSERT_NO_FATAL_FAILURE(job.StartJob({0, 1, 2}));
  // Trainer 1 is killed mid-chunk: after its first steps (it then holds a
  // claim whatever it has finished).
  ASSERT_TRUE(job.AwaitLine("trainer.1", "@oar progress")) << job.Log("trainer.1");
  job.procs["trainer.1"]->group.SignalOne(0, SIGKILL);
  job.StartTrainer(3);
  job.WaitAll(180);
  for (const std::string name : {"pserver", "trainer.0", "trainer.2", "trainer.3"}) {
    ASSERT_TRUE(job.procs[name]->code.has_value()) << name << " hung:\n" << job.Log(name);
    EXPECT_EQ(*job.procs[name]->code, 0) << name << ":\n" << job.Log(name);
  }
  // Every chunk of every epoch once, whoever trained it.
  const auto trained = job.Trained({"trainer.0", "trainer.1", "trainer.2", "trainer.3"});
  std::set<std::string> trainers;
  for (int e = 1; e <= kEpochs; ++e) {
    for (int c = 0; c < kChunks; ++c) {
      const auto it = trained.find(std::make_pair(e, c));
      ASSERT_NE(it, trained.end()) << "epoch " << e << " chunk " << c << " never trained";
      const std::vector<std::string>& by = it->second;
      ASSERT_EQ(by.size(), 1u) << "epoch " << e << " chunk " << c;
      trainers.insert(by[0]);
    }
  }
  EXPECT_EQ(trained.size(), static_cast<size_t>(kEpochs * kChunks));
  EXPECT_EQ(trainers.count("trainer.3"), 1u) << "the joiner trained no chunk";
  const std::string ps = job.Log("pserver");
  EXPECT_NE(ps.find("trainer 1 left the job without completing"), std::string::npos) << ps;
  EXPECT_NE(ps.find("trainer 3 joined the job"), std::string::npos) << ps;
  // The chunk trainer 1 held was handed out again, and said so.
  std::string survivors;
  for (const std::string name : {"trainer.0", "trainer.2", "trainer.3"}) survivors += job.Log(name);
  EXPECT_NE(survivors.find("again, after trainer/1 left it unfinished"), std::string::npos) << survivors;
  // A trainer started after the job ended (as a StatefulSet restarts one
  // that completed) says the job is over and ends well.
  job.StartTrainer(1);
  job.WaitAll(60);
  ASSERT_TRUE(job.procs["trainer.1"]->code.has_value());
  EXPECT_EQ(*job.procs["trainer.1"]->code, 0) << job.Log("trainer.1");
  EXPECT_NE(job.Log("trainer.1").find("elastic job 'e2e' is over (pserver/"), std::string::npos)
      << job.Log("trainer.1");
  std::ifstream prom(job.dir + "/pserver.prom");
  const std::string metrics((std::istreambuf_iterator<char>(prom)), std::istreambuf_iterator<char>());
  EXPECT_NE(metrics.find("oar_pserver_elastic_joins_total 4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("oar_pserver_elastic_leaves_total 1"), std::string::npos) << metrics;
  // It trained as one process does over the same data (async: not equal;
  // 0.80 against 0.84 seen once with another job on the 2 cores, which
  // starves one trainer and stales the others' steps).
  Result single = Oar("train --model fashion_mlp --batch_size 16 --epochs 2 --limit 20000");
  ASSERT_EQ(single.code, 0) << single.out;
  const double want = ValueAfter(single.out, "test_accuracy="),
               got = ValueAfter(job.Log("trainer.0"), "test_accuracy=");
  EXPECT_NEAR(got, want, 0.05) << job.Log("trainer.0");
}

// etcd itself goes down mid-job (SIGKILL, as a crashed pod) and comes back
// with its data 1.5 s later, within the members' lease: the trainers' and
// pserver's calls wait for it, nobody leaves, and the job finishes with
// every chunk trained once.
class ElasticModeE2eTest : public ::testing::TestWithParam<bool> {};  // sync?

TEST_P(ElasticModeE2eTest, AJobKeepsTrainingThroughAnEtcdRestart) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  job.sync = GetParam();
  ASSERT_NO_FATAL_FAILURE(job.StartJob({0, 1}));
  ASSERT_TRUE(job.AwaitLine("trainer.0", "@oar chunk")) << job.Log("trainer.0");  // a chunk done, others under way
  job.etcd->Kill();
  absl::SleepFor(absl::Milliseconds(1500));
  ASSERT_TRUE(job.etcd->Restart().ok());
  job.WaitAll(180);
  for (const std::string name : {"pserver", "trainer.0", "trainer.1"}) {
    ASSERT_TRUE(job.procs[name]->code.has_value()) << name << " hung:\n" << job.Log(name);
    EXPECT_EQ(*job.procs[name]->code, 0) << name << ":\n" << job.Log(name);
  }
  const auto trained = job.Trained({"trainer.0", "trainer.1"});
  EXPECT_EQ(trained.size(), static_cast<size_t>(kEpochs * kChunks));
  for (const auto& [which, by] : trained) EXPECT_EQ(by.size(), 1u) << which.first << "/" << which.second;
  const std::string ps = job.Log("pserver");
  EXPECT_EQ(ps.find("left the job"), std::string::npos) << ps;
}

// A sync trainer stopped (SIGSTOP: hung, or cut off from etcd) is taken
// out of the steps once the pserver says `takes_out`, and exactly it: the
// others go on without it, every chunk is trained once, and when it wakes
// its calls are refused, it says it was taken out and ends without
// stopping the job.
// Trainer 1 starts first and the others once it trained a chunk, so that
// work is left for them when it stops (a trainer slow to start under load
// could otherwise be stopped on the job's last chunk, with nobody left to
// wait on it).
void ExpectAStoppedSyncTrainerIsTakenOutAndOnlyIt(ElasticJob& job, const std::string& takes_out) {
  job.sync = true;
  ASSERT_NO_FATAL_FAILURE(job.StartJob({1}));
  ASSERT_TRUE(job.AwaitLine("trainer.1", "@oar chunk ")) << job.Log("trainer.1");
  job.StartTrainer(0);
  job.StartTrainer(2);
  ASSERT_TRUE(job.AwaitLine("trainer.0", "@oar chunk ")) << job.Log("trainer.0");
  ASSERT_TRUE(job.AwaitLine("trainer.2", "@oar chunk ")) << job.Log("trainer.2");
  job.procs["trainer.1"]->group.SignalOne(0, SIGSTOP);
  const bool said = job.AwaitPserverSays(takes_out, 30);
  const bool out = said && job.AwaitPserverSays("trainer 1 left the job", 30);
  job.procs["trainer.1"]->group.SignalOne(0, SIGCONT);
  ASSERT_TRUE(said) << job.Log("pserver");
  ASSERT_TRUE(out) << job.Log("pserver");
  job.WaitAll(180);
  for (const std::string name : {"pserver", "trainer.0", "trainer.2"}) {
    ASSERT_TRUE(job.procs[name]->code.has_value()) << name << " hung:\n" << job.Log(name);
    EXPECT_EQ(*job.procs[name]->code, 0) << name << ":\n" << job.Log(name);
  }
  ASSERT_TRUE(job.procs["trainer.1"]->code.has_value()) << job.Log("trainer.1");
  EXPECT_NE(job.Log("trainer.1").find("the job's pservers took this trainer out"), std::string::npos)
      << job.Log("trainer.1");
  const auto trained = job.Trained({"trainer.0", "trainer.1", "trainer.2"});
  EXPECT_EQ(trained.size(), static_cast<size_t>(kEpochs * kChunks));
  for (const auto& [which, by] : trained) EXPECT_EQ(by.size(), 1u) << which.first << "/" << which.second;
  const std::string ps = job.Log("pserver");
  EXPECT_EQ(ps.find("trainer 0 left the job"), std::string::npos) << ps;
  EXPECT_EQ(ps.find("trainer 2 left the job"), std::string::npos) << ps;
}

// Past its lease (4 s): its entry goes, by the lease's run-out or by the
// pserver's revoke of a trainer its step waited on for the lease.
TEST(ElasticE2eTest, ASyncTrainerStoppedPastItsLeaseIsTakenOutAndOnlyIt) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  ExpectAStoppedSyncTrainerIsTakenOutAndOnlyIt(job, "trainer 1 left the job");
}

// A trainer stuck with its lease alive (here a 60 s lease: its own
// --rpc_deadline, against the pserver's 4 s) would hold every step until
// the lease ran out; the pserver revokes its lease once a step has waited
// on it, silent, for the pserver's 4 s, and the job goes on.
TEST(ElasticE2eTest, AStuckSyncTrainerWithALiveLeaseIsTakenOutOnceAStepWaitedOnItForTheLease) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  job.more_args["trainer.1"] = {"--rpc_deadline=60000"};
  ExpectAStoppedSyncTrainerIsTakenOutAndOnlyIt(job, "(revoking its lease in etcd)");
  EXPECT_NE(job.Log("pserver").find("trainer 1 ("), std::string::npos) << job.Log("pserver");
  ASSERT_TRUE(job.procs["trainer.1"]->code.has_value());
  EXPECT_EQ(*job.procs["trainer.1"]->code, cli::kExitTakenOut) << job.Log("trainer.1");
}

// A trainer added as the job ends (it registered, and then the others
// trained the last chunks and the pservers ended before it reached them)
// ends well, saying the job is over, instead of failing after its
// --rpc_deadline for pservers that are gone. Here no pserver ever answers
// (the endpoint's socket is never served) and the test says in etcd what
// an ending pserver says.
TEST_P(ElasticModeE2eTest, ATrainerWaitingForPserversThatEndedEndsWell) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  job.sync = GetParam();
  job.rpc_deadline_ms = 60000;  // what it would wait without asking etcd
  auto server = EtcdServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  job.etcd = std::move(*server);
  job.StartTrainer(0);
  ASSERT_TRUE(job.AwaitLine("trainer.0", "trainer/0 joined elastic job 'e2e'")) << job.Log("trainer.0");
  auto etcd = elastic::EtcdClient::Connect(job.etcd->url(), absl::Seconds(5));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  ASSERT_TRUE((*etcd)->Put("/oar/e2e/done", "pserver/" + job.socket.endpoint()).ok());
  job.WaitAll(30);
  ASSERT_TRUE(job.procs["trainer.0"]->code.has_value()) << "still waiting:\n" << job.Log("trainer.0");
  EXPECT_EQ(*job.procs["trainer.0"]->code, 0) << job.Log("trainer.0");
  EXPECT_NE(job.Log("trainer.0").find("trainer/0: the job ended before this trainer joined its pservers' steps"),
            std::string::npos)
      << job.Log("trainer.0");
}

// A sync trainer told to stop (SIGTERM, as Kubernetes sends to a pod that
// `kubectl scale` removes) leaves the job at once: it revokes its own lease,
// so the pservers drop it and go on without waiting out the lease (a minute
// here), and every chunk, its unfinished one included, is trained once.
TEST(ElasticE2eTest, ASyncTrainerToldToStopLeavesAtOnce) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  ElasticJob job;
  job.sync = true;
  job.rpc_deadline_ms = 60000;
  ASSERT_NO_FATAL_FAILURE(job.StartJob({0, 1, 2}));
  ASSERT_TRUE(job.AwaitLine("trainer.1", "@oar chunk ")) << job.Log("trainer.1");
  job.procs["trainer.1"]->group.SignalOne(0, SIGTERM);
  const bool left = job.AwaitPserverSays("trainer 1 left the job", 30);  // half the lease: only its revoke makes it
  ASSERT_TRUE(left) << job.Log("pserver") << job.Log("trainer.1");
  job.WaitAll(180);
  for (const std::string name : {"pserver", "trainer.0", "trainer.2"}) {
    ASSERT_TRUE(job.procs[name]->code.has_value()) << name << " hung:\n" << job.Log(name);
    EXPECT_EQ(*job.procs[name]->code, 0) << name << ":\n" << job.Log(name);
  }
  EXPECT_NE(job.Log("trainer.1").find("trainer/1: SIGTERM: left the job"), std::string::npos) << job.Log("trainer.1");
  const auto trained = job.Trained({"trainer.0", "trainer.1", "trainer.2"});
  EXPECT_EQ(trained.size(), static_cast<size_t>(kEpochs * kChunks))
      << job.Log("trainer.1") << job.Log("trainer.0") << job.Log("trainer.2");
  for (const auto& [which, by] : trained) EXPECT_EQ(by.size(), 1u) << which.first << "/" << which.second;
}

INSTANTIATE_TEST_SUITE_P(AsyncAndSync, ElasticModeE2eTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "sync" : "async"; });

// What elastic jobs do not do yet is refused before anything starts, saying
// what to change.
TEST(ElasticE2eTest, ElasticSyncAsyncExecutorTrainersAreRefusedWithWhatToChange) {
  const std::string env = "PADDLE_TRAINING_ROLE=TRAINER PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ID=0 ";
  Result sync = RunCommand(env + "PADDLE_PSERVER_ENDPOINTS=127.0.0.1:1 " + OarBinary() +
                           " run --model ctr_dnn --data_feed /no/data_feed.prototxt --files '/no/*' "
                           "--elastic_server etcd://127.0.0.1:1");
  EXPECT_NE(sync.code, 0);
  EXPECT_NE(sync.out.find("AsyncExecutor trainers (--data_feed files) of an elastic job train async: add --async"),
            std::string::npos)
      << sync.out;
}

}  // namespace
}  // namespace oar
