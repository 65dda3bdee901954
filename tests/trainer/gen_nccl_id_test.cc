// gen_nccl_id through the path a user takes: DistributeTranspiler's nccl2
// mode appends it to each trainer's startup program, and three trainers
// (threads) running their startups end up with the same 128-byte id.
#include "trainer/gen_nccl_id_op.h"

#include <thread>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/executor.h"
#include "common/rpc/rpc_common.h"
#include "common/status.h"
#include "gtest/gtest.h"
#include "tests/util/free_port.h"
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
  c.wait_port = false;  // the op waits for the others itself
  DistributeTranspiler t(c);
  OAR_RETURN_IF_ERROR(t.transpile(id, &main.desc(), "", eps[0] + "," + eps[1] + "," + eps[2], true, &startup.desc(),
                                  eps[static_cast<size_t>(id)]));
  return t.get_trainer_startup_program();
}

TEST(GenNcclIdTest, EveryTrainerGetsTrainerZerosId) {
  OpRegistry::ExtendGlobal(RegisterGenNcclIdOp);
  FLAGS_rpc_deadline = 20000;
  const std::vector<std::string> eps = {FreeEndpoint(), FreeEndpoint(), FreeEndpoint()};
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
      Executor exe;
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
  FLAGS_rpc_deadline = 500;
  const std::vector<std::string> eps = {FreeEndpoint(), FreeEndpoint(), FreeEndpoint()};
  auto startup = Nccl2Startup(1, eps);
  ASSERT_TRUE(startup.ok()) << startup.status();
  Executor exe;
  Scope scope;
  absl::Status s = exe.Run(*startup, &scope).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find(eps[1]), std::string::npos) << s;
  FLAGS_rpc_deadline = 20000;
}

}  // namespace
}  // namespace oar
