// gen_nccl_id through the path a user takes: DistributeTranspiler's nccl2
// mode appends it to each trainer's startup program, and three trainers
// (threads) running their startups end up with the same 128-byte id.
#include "trainer/gen_nccl_id_op.h"

#include <thread>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/status.h"
#include "common/framework/executor.h"
#include "common/rpc/rpc_common.h"
#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"
#include "tests/util/trainer_net.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

absl::StatusOr<ProgramDesc> Nccl2Startup(int id, const std::vector<std::string>& eps) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    optimizer::SGD(0.1f).minimize(layers::mean(layers::fc(layers::data("x", {4}), 1)));
  }
  DistributeTranspilerConfig c;
  c.mode = "nccl2";
  DistributeTranspiler t(c);
  OAR_RETURN_IF_ERROR(t.transpile(id, &main.desc(), "", eps[0] + "," + eps[1] + "," + eps[2], true, &startup.desc(),
                                  eps[static_cast<size_t>(id)]));
  return t.get_trainer_startup_program();
}

TEST(GenNcclIdTest, EveryTrainerGetsTrainerZerosId) {
  OpRegistry::ExtendGlobal(RegisterGenNcclIdOp);
  const std::vector<std::string> eps = {ReservedEndpoint(), ReservedEndpoint(), ReservedEndpoint()};
  std::vector<std::vector<uint8_t>> ids(3);
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto startup = Nccl2Startup(t, eps);
      if (!startup.ok()) {
        status[t] = startup.status();
        return;
      }
      TrainerNet net(nullptr, {.deadline_ms = 20000});
      Executor exe(CPUPlace(), net.options());
      Scope scope;
      status[t] = exe.Run(*startup, &scope).status();
      if (status[t].ok()) ids[t] = TensorToVector<uint8_t>(scope.FindVar("NCCLID")->Get<Tensor>());
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 3; ++t) ASSERT_TRUE(status[t].ok()) << "trainer " << t << ": " << status[t];
  ASSERT_EQ(ids[0].size(), static_cast<size_t>(kNcclIdBytes));
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  EXPECT_NE(ids[0], std::vector<uint8_t>(kNcclIdBytes, 0));
}

TEST(GenNcclIdTest, AMissingTrainerZeroIsABoundedErrorNamingTheEndpoint) {
  OpRegistry::ExtendGlobal(RegisterGenNcclIdOp);
  const std::vector<std::string> eps = {ReservedEndpoint(), ReservedEndpoint(), ReservedEndpoint()};
  auto startup = Nccl2Startup(1, eps);
  ASSERT_TRUE(startup.ok()) << startup.status();
  TrainerNet net(nullptr, {.deadline_ms = 500});
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  absl::Status s = exe.Run(*startup, &scope).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find(eps[1]), std::string::npos) << s;
}

// Regression: a header-only message to a trainer waiting for the id threw
// on gRPC's thread and terminated the process; now it is an error answer
// and the receiver keeps waiting for the real id.
TEST(GenNcclIdTest, AHeaderOnlyMessageIsAnErrorAnswerNotACrash) {
  OpRegistry::ExtendGlobal(RegisterGenNcclIdOp);
  const std::vector<std::string> eps = {ReservedEndpoint(), ReservedEndpoint(), ReservedEndpoint()};
  absl::Status status;
  std::vector<uint8_t> id;
  std::thread t1([&] {
    auto startup = Nccl2Startup(1, eps);
    TrainerNet net(nullptr, {.deadline_ms = 20000});
    Executor exe(CPUPlace(), net.options());
    Scope scope;
    status = startup.ok() ? exe.Run(*startup, &scope).status() : startup.status();
    if (status.ok()) id = TensorToVector<uint8_t>(scope.FindVar("NCCLID")->Get<Tensor>());
  });
  TrainerNet probe;
  // Not ASSERT: returning with t1 running would terminate the whole binary.
  if (absl::Status ready = probe.client.WaitServerReady({eps[1]}, 20000); !ready.ok()) {
    t1.join();
    FAIL() << ready << "; trainer 1: " << status;
  }
  absl::Status bad = probe.client.AsyncSendVar(eps[1], "NCCLID", nullptr)->Wait();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("no value"), std::string::npos) << bad;
  Variable wrong;
  wrong.GetMutable<Tensor>()->mutable_data<uint8_t>({7});
  EXPECT_EQ(probe.client.AsyncSendVar(eps[1], "NCCLID", &wrong, {.raw_bytes = true})->Wait().code(),
            absl::StatusCode::kInvalidArgument);
  // The real id still gets through.
  Variable real;
  uint8_t* p = real.GetMutable<Tensor>()->mutable_data<uint8_t>({kNcclIdBytes});
  for (int i = 0; i < kNcclIdBytes; ++i) p[i] = static_cast<uint8_t>(i + 1);
  EXPECT_TRUE(probe.client.AsyncSendVar(eps[1], "NCCLID", &real, {.raw_bytes = true})->Wait().ok());
  t1.join();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(id.size(), static_cast<size_t>(kNcclIdBytes));
  EXPECT_EQ(id[5], 6);
}

}  // namespace
}  // namespace oar
