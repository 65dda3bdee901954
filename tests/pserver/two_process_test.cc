// A pserver in its own process (pserver_process_main) and trainers in this
// one, over loopback: sync training ends with the pserver exiting 0;
// SIGTERM makes an idle pserver exit 0 promptly, even when sent the moment
// it has written its port file (its handler is in place before).
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/pserver/dist_fixture.h"
#include "tests/util/build_paths.h"
#include "tests/util/trainer_net.h"

extern char** environ;

namespace oar {
namespace {

struct Process {
  pid_t pid = -1;
  std::string endpoint;
  explicit Process(int trainers) {
    const std::string port_file = ::testing::TempDir() + "/oar_ps2_port_" + std::to_string(::getpid());
    std::remove(port_file.c_str());
    std::vector<std::string> args = {PserverMain(), "--trainers=" + std::to_string(trainers),
                                     "--pserver_port_file=" + port_file, "--rpc_deadline=20000"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    endpoint = WaitForPortFile(port_file);
    EXPECT_FALSE(endpoint.empty());
    std::remove(port_file.c_str());  // read: leave nothing in the temp folder
  }
  // Exit status, or -1 if it has not exited within `seconds`.
  int Wait(int seconds) {
    for (int i = 0; i < seconds * 100; ++i) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  ~Process() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

void Train(const std::string& ep, int id, absl::Status* result) {
  DistPrograms d(ep, 2, true);
  for (auto* p : {&d.trainer, &d.trainer_startup}) {
    for (size_t i = 0; i < p->Block(0).OpSize(); ++i)
      p->MutableBlock(0)->MutableOp(i)->SetAttr("trainer_id", int32_t{id});
  }
  TrainerNet net;
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  *result = exe.Run(d.trainer_startup, &scope).status();
  for (int step = 0; step < 5 && result->ok(); ++step) {
    *result = exe.Run(d.trainer, &scope, DistPrograms::Batch(step, id * 4, id * 4 + 4), {d.loss.name()}).status();
  }
  result->Update(net.client.AsyncSendComplete(ep, id)->Wait());
}

TEST(TwoProcessTest, SyncTrainingAgainstAPserverProcess) {
  Process ps(2);
  ASSERT_FALSE(ps.endpoint.empty());
  absl::Status r0, r1;
  std::thread t0(Train, ps.endpoint, 0, &r0), t1(Train, ps.endpoint, 1, &r1);
  t0.join();
  t1.join();
  EXPECT_TRUE(r0.ok()) << r0;
  EXPECT_TRUE(r1.ok()) << r1;
  EXPECT_EQ(ps.Wait(30), 0);  // exits by itself once both completed
}

TEST(TwoProcessTest, SigtermStopsAPserverCleanly) {
  Process ps(2);
  ASSERT_FALSE(ps.endpoint.empty());
  kill(ps.pid, SIGTERM);
  EXPECT_EQ(ps.Wait(30), 0);
}

}  // namespace
}  // namespace oar
