// The pieces of `oar launch --elastic` alone: the chaos schedule as users
// write it (and every clause it cannot read named at once), the runner
// firing each event once at its step, the summary's check that every chunk
// was trained exactly once (and what it says when one was not), and a
// process group and monitor that take a process added while others run.
#include "cli/elastic_launch.h"

#include <chrono>
#include <csignal>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "cli/launch_monitor.h"
#include "cli/process_group.h"
#include "gtest/gtest.h"

namespace oar::cli {
namespace {

TEST(ElasticLaunchTest, ReadsAChaosScheduleAsUsersWriteIt) {
  auto s = ParseChaos("kill trainer 1 at step 200;  add 2 at step 400 ;", 4);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].kind, ChaosEvent::Kind::kKill);
  EXPECT_EQ((*s)[0].trainer, 1);
  EXPECT_EQ((*s)[0].at_step, 200);
  EXPECT_EQ((*s)[1].kind, ChaosEvent::Kind::kAdd);
  EXPECT_EQ((*s)[1].count, 2);
  EXPECT_EQ((*s)[1].at_step, 400);
  EXPECT_EQ((*s)[1].text, "add 2 at step 400");
  auto bad = ParseChaos("kill trainer 4 at step 1; add 0 at step 2; remove trainer 1 at step 3", 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'kill trainer 4 at step 1' (trainer ids are 0..3), 'add 0 at step 2', "
                                        "'remove trainer 1 at step 3'"),
            std::string::npos)
      << bad.status();
}

TEST(ElasticLaunchTest, TheRunnerFiresEachEventOnceAtItsStepOnTheLowestFreeIds) {
  auto events = ParseChaos("kill trainer 1 at step 10; add 2 at step 20; kill trainer 3 at step 5", 4);
  ASSERT_TRUE(events.ok());
  std::vector<bool> live = {true, true, true, false};  // trainer 3 never started
  std::vector<size_t> killed;
  std::vector<int> started;
  ChaosRunner r(*events, 4,
                {.process_of = [&](int id) -> std::optional<size_t> {
                   if (!live[static_cast<size_t>(id)]) return std::nullopt;
                   return static_cast<size_t>(id);
                 },
                 .kill =
                     [&](size_t p, int signal) {
                       EXPECT_EQ(signal, SIGKILL);
                       killed.push_back(p);
                       live[p] = false;
                     },
                 .start = [&](int id) -> absl::StatusOr<std::string> {
                   started.push_back(id);
                   live[static_cast<size_t>(id)] = true;
                   return absl::StrCat("trainer.", id, ".run2");
                 }});
  ASSERT_TRUE(r.Tick(4).ok());
  EXPECT_TRUE(r.done().empty());
  ASSERT_TRUE(r.Tick(12).ok());  // both kills are due
  EXPECT_EQ(killed, std::vector<size_t>{1});
  ASSERT_EQ(r.done().size(), 2u);
  EXPECT_EQ(r.done()[0], "trainer 3 was not running at step 12: nothing to kill");  // in step order
  EXPECT_EQ(r.done()[1], "killed trainer 1 (SIGKILL) at step 12");
  EXPECT_EQ(r.NotReached(), std::vector<std::string>{"'add 2 at step 20'"});
  ASSERT_TRUE(r.Tick(25).ok());
  ASSERT_TRUE(r.Tick(30).ok());  // once
  EXPECT_EQ(started, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.done().back(), "added trainer.1.run2, trainer.3.run2 at step 25");
  EXPECT_TRUE(r.NotReached().empty());
}

// A freeze is SIGSTOP, as a machine that stopped answering: the process
// stays (nothing is revoked), counts as frozen, and its id is free for an
// add (the new process joins once the old one's lease is gone). A thaw
// wakes the frozen process of the id, not the new one that holds it now.
TEST(ElasticLaunchTest, AFreezeIsSigstopAndLeavesItsIdToAnAddAndAThawWakesTheFrozenProcess) {
  auto events = ParseChaos("freeze trainer 1 at step 10; add 1 at step 12; thaw trainer 1 at step 14", 2);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::pair<size_t, int>> signals;
  std::vector<int> started;
  size_t newest_of_1 = 1;
  ChaosRunner r(*events, 2,
                {.process_of = [&](int id) -> std::optional<size_t> { return id == 1 ? newest_of_1 : 0; },
                 .kill = [&](size_t p, int signal) { signals.emplace_back(p, signal); },
                 .start = [&](int id) -> absl::StatusOr<std::string> {
                   started.push_back(id);
                   newest_of_1 = 2;
                   return absl::StrCat("trainer.", id, ".run2");
                 }});
  ASSERT_TRUE(r.Tick(10).ok());
  EXPECT_EQ(signals, (std::vector<std::pair<size_t, int>>{{1, SIGSTOP}}));
  EXPECT_TRUE(r.frozen(1));
  EXPECT_FALSE(r.frozen(0));
  EXPECT_EQ(r.done().back(), "froze trainer 1 (SIGSTOP) at step 10");
  ASSERT_TRUE(r.Tick(12).ok());
  EXPECT_EQ(started, std::vector<int>{1});
  EXPECT_EQ(r.done().back(), "added trainer.1.run2 at step 12");
  ASSERT_TRUE(r.Tick(14).ok());
  EXPECT_EQ(signals.back(), std::make_pair(size_t{1}, SIGCONT));
  EXPECT_FALSE(r.frozen(1));
  EXPECT_EQ(r.done().back(), "thawed trainer 1 (SIGCONT) at step 14");
  auto again = ParseChaos("thaw trainer 0 at step 1", 2);
  ASSERT_TRUE(again.ok());
  ChaosRunner r2(*again, 2, {.process_of = [](int) { return std::optional<size_t>(0); }, .kill = [](size_t, int) {}});
  ASSERT_TRUE(r2.Tick(1).ok());
  EXPECT_EQ(r2.done().back(), "trainer 0 was not frozen at step 1: nothing to thaw");
  // The job done without it, a frozen process is killed.
  auto freeze = ParseChaos("freeze trainer 0 at step 1", 2);
  ASSERT_TRUE(freeze.ok());
  std::vector<int> sent;
  ChaosRunner r3(*freeze, 2,
                 {.process_of = [](int) { return std::optional<size_t>(0); },
                  .kill = [&](size_t, int signal) { sent.push_back(signal); }});
  ASSERT_TRUE(r3.Tick(1).ok());
  r3.KillFrozen();
  EXPECT_EQ(sent, (std::vector<int>{SIGSTOP, SIGKILL}));
  EXPECT_FALSE(r3.frozen(0));
}

// A killed process is running until the launcher reaps it: an add due at
// once waits until it is gone, and then takes its id.
TEST(ElasticLaunchTest, AnAddWaitsUntilTheProcessKilledBeforeItIsGone) {
  auto events = ParseChaos("kill trainer 1 at step 10; add 1 at step 10", 2);
  ASSERT_TRUE(events.ok()) << events.status();
  bool reaped = false;
  std::vector<int> started;
  ChaosRunner r(*events, 2,
                {.process_of = [&](int id) -> std::optional<size_t> {
                   if (id == 1 && reaped) return std::nullopt;
                   return static_cast<size_t>(id);
                 },
                 .kill = [&](size_t, int) {},
                 .start = [&](int id) -> absl::StatusOr<std::string> {
                   started.push_back(id);
                   return absl::StrCat("trainer.", id, ".run2");
                 }});
  ASSERT_TRUE(r.Tick(10).ok());
  EXPECT_EQ(r.done(), std::vector<std::string>{"killed trainer 1 (SIGKILL) at step 10"});
  EXPECT_EQ(r.NotReached(), std::vector<std::string>{"'add 1 at step 10'"});
  ASSERT_TRUE(r.Tick(11).ok());
  EXPECT_TRUE(started.empty());  // not reaped yet
  reaped = true;
  ASSERT_TRUE(r.Tick(12).ok());
  EXPECT_EQ(started, std::vector<int>{1});
  EXPECT_EQ(r.done().back(), "added trainer.1.run2 at step 12");
}

TEST(ElasticLaunchTest, AStopIsSigtermAndWaitsForItsTrainersFirstStep) {
  auto events = ParseChaos("stop trainer 1 at step 10; add 1 at step 12", 4);
  ASSERT_TRUE(events.ok()) << events.status();
  bool stepped = false, live = true;
  std::vector<size_t> stopped;
  std::vector<int> signals;
  ChaosRunner r(
      *events, 2,
      {.process_of = [&](int id) -> std::optional<size_t> {
         if (id == 1 && !live) return std::nullopt;
         return static_cast<size_t>(id);
       },
       .kill =
           [&](size_t p, int signal) {
             stopped.push_back(p);
             signals.push_back(signal);
             live = false;
           },
       .has_stepped = [&](size_t p) { return p != 1 || stepped; },
       .start = [&](int id) -> absl::StatusOr<std::string> { return absl::StrCat("trainer.", id, ".run2"); }});
  ASSERT_TRUE(r.Tick(15).ok());  // trainer 1 still starting: the stop waits, and the add after it
  EXPECT_TRUE(stopped.empty());
  EXPECT_EQ(r.NotReached(), (std::vector<std::string>{"'stop trainer 1 at step 10'", "'add 1 at step 12'"}));
  stepped = true;
  ASSERT_TRUE(r.Tick(16).ok());
  EXPECT_EQ(stopped, std::vector<size_t>{1});
  EXPECT_EQ(signals, std::vector<int>{SIGTERM});
  ASSERT_EQ(r.done().size(), 2u);
  EXPECT_EQ(r.done()[0], "stopped trainer 1 (SIGTERM) at step 16");
  EXPECT_EQ(r.done()[1], "added trainer.1.run2 at step 16");  // on the id the stop freed
  EXPECT_TRUE(r.NotReached().empty());
  // A trainer that ends before its first step is not waited for.
  auto again = ParseChaos("stop trainer 1 at step 20", 4);
  ASSERT_TRUE(again.ok());
  ChaosRunner r2(*again, 2,
                 {.process_of = [&](int id) -> std::optional<size_t> {
                    if (id == 1 && !live) return std::nullopt;
                    return static_cast<size_t>(id);
                  },
                  .kill = [&](size_t p, int) { stopped.push_back(p); },
                  .has_stepped = [](size_t) { return false; },
                  .start = [](int) -> absl::StatusOr<std::string> { return std::string(); }});
  ASSERT_TRUE(r2.Tick(20).ok());
  EXPECT_EQ(r2.done(), std::vector<std::string>{"trainer 1 was not running at step 20: nothing to stop"});
}

TEST(ElasticLaunchTest, TheSummarySaysWhetherEveryChunkWasTrainedExactlyOnce) {
  std::vector<TrainerReport> trainers = {{.name = "trainer.0"}, {.name = "trainer.1", .trainer = 1, .gone = true}};
  const std::vector<std::string> names = {"pserver.0", "trainer.0", "trainer.1"};
  std::vector<ChunkDone> chunks = {{1, 1, 0}, {1, 1, 1}, {2, 1, 2}, {1, 2, 0}, {1, 2, 1}, {1, 2, 2}};
  bool once = false;
  auto lines = ElasticSummaryLines(trainers, chunks, names, 2, 3, {"killed trainer 1 (SIGKILL) at step 9"}, &once);
  EXPECT_TRUE(once);
  EXPECT_EQ(lines, (std::vector<std::string>{"chaos: killed trainer 1 (SIGKILL) at step 9",
                                             "chunks trained: trainer.0 5, trainer.1 1 (gone)",
                                             "every chunk trained exactly once: 2 epoch(s) x 3 chunks"}));
  chunks.push_back({1, 2, 1});       // epoch 2 chunk 1 twice
  chunks.erase(chunks.begin() + 1);  // epoch 1 chunk 1 never
  lines = ElasticSummaryLines(trainers, chunks, names, 2, 3, {}, &once);
  EXPECT_FALSE(once);
  EXPECT_EQ(lines.back(), "chunks (epoch/chunk) not trained exactly once: never 1/1; more than once 2/1 x2");
  // Trainer 1 was killed after etcd took its report of epoch 1 chunk 1 and
  // before it said so: etcd's record counts it, for the process that died.
  chunks.pop_back();
  lines = ElasticSummaryLines(trainers, chunks, names, 2, 3, {}, &once,
                              {{{1, 1}, "trainer/1"}, {{1, 0}, "trainer/0"}, {{2, 2}, "trainer/1"}});
  EXPECT_TRUE(once);
  EXPECT_EQ(lines,
            (std::vector<std::string>{"chunks trained: trainer.0 4, trainer.1 2 (gone)",
                                      "chunks etcd has as done whose trainer died before saying so: 1/1 by trainer.1",
                                      "every chunk trained exactly once: 2 epoch(s) x 3 chunks"}));
}

TEST(ElasticLaunchTest, AProcessAddedWhileOthersRunIsReadAndMonitored) {
  LaunchMonitor monitor({"trainer.0"}, {0}, "");
  absl::Mutex mu;
  std::vector<std::pair<size_t, std::string>> lines;
  ProcessGroup g;
  auto sh = [](const std::string& script) { return std::vector<std::string>{"/bin/sh", "-c", script}; };
  ASSERT_TRUE(g.Start({{"trainer.0", sh("echo '@oar progress epoch=1 step=1'; sleep 0.3; echo first")}},
                      [&](size_t c, const std::string& line, bool out) {
                        monitor.OnLine(c, line, out);
                        absl::MutexLock l(&mu);
                        lines.push_back({c, line});
                      })
                  .ok());
  ASSERT_TRUE(monitor.AddChild("trainer.0.run2", 0).ok());
  ASSERT_TRUE(g.Add({"trainer.0.run2", sh("echo '@oar progress epoch=1 step=1'; "
                                          "echo '@oar chunk trainer=0 epoch=1 chunk=4 examples=9'; echo second")})
                  .ok());
  EXPECT_EQ(g.size(), 2u);
  for (int i = 0; i < 200 && (g.running(0) || g.running(1)); ++i) {
    for (const ChildExit& e : g.Poll()) {
      EXPECT_EQ(e.code, 0);
      EXPECT_GT(e.pid, 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  g.DrainOutput();
  monitor.ChildGone(0);
  absl::MutexLock l(&mu);
  EXPECT_NE(std::find(lines.begin(), lines.end(), std::make_pair(size_t{0}, std::string("first"))), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), std::make_pair(size_t{1}, std::string("second"))), lines.end());
  EXPECT_EQ(monitor.JobSteps(), 2);
  ASSERT_EQ(monitor.Chunks().size(), 1u);
  EXPECT_EQ(monitor.Chunks()[0].child, 1u);
  EXPECT_EQ(monitor.Chunks()[0].chunk, 4);
  const auto reports = monitor.Trainers();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_TRUE(reports[0].gone);  // no result: it died
  EXPECT_EQ(reports[1].name, "trainer.0.run2");
}

}  // namespace
}  // namespace oar::cli
