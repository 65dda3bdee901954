// ParameterServer's answers to bad messages (each INVALID_ARGUMENT with the
// reason, and the server keeps serving), to a trainer that counts another
// number of trainers, checkpoint notify, and Stop.
#include "pserver/parameter_server.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/api/io.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/pserver/dist_fixture.h"
#include "tests/pserver/running_server.h"

namespace oar {
namespace {

struct Server {
  DistPrograms d{"127.0.0.1:0", 2, true};
  Executor exe;
  Scope scope;
  rpc::GrpcTransport transport;
  std::unique_ptr<ParameterServer> ps;
  std::string ep;
  Server() {
    EXPECT_TRUE(exe.Run(d.startup.desc(), &scope).ok());
    auto created = ParameterServer::Create(PserverConfigOf(d, 2, 20000, &transport), d.pserver, &scope);
    EXPECT_TRUE(created.ok()) << created.status();
    ps = *std::move(created);
    auto bound = ps->Start();
    EXPECT_TRUE(bound.ok()) << bound.status();
    ep = *bound;
  }
};

Variable Dense(DataType dt, const DDim& dims) {
  Variable v;
  Tensor* t = v.GetMutable<Tensor>();
  t->Resize(dims);
  std::memset(t->mutable_data(dt), 0, t->nbytes());
  return v;
}

TEST(ParameterServerTest, BadMessagesAreInvalidArgumentAndServingGoesOn) {
  Server s;
  rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  const std::string w = "fc_0.w_0", wg = "fc_0.w_0@GRAD";  // shape [4, 1]
  auto send = [&](const std::string& name, const Variable& v, int tid) {
    return c.AsyncSendVar(s.ep, name, &v, {.trainer_id = tid})->Wait();
  };
  struct Case {
    std::string name;
    Variable v;
    int tid;
    std::string expect;
  };
  std::vector<Case> cases;
  cases.push_back({"nope@GRAD", Dense(DataType::kFloat32, {4, 1}), 0, "this pserver receives no such variable"});
  cases.push_back(
      {wg, Dense(DataType::kInt64, {4, 1}), 1, "sent '" + wg + "' as int64[4, 1]: the pserver's dtype is float32"});
  cases.push_back({wg, Dense(DataType::kFloat32, {3, 1}), 0, "as float32[3, 1]: the pserver's shape is [4, 1]"});
  cases.push_back({wg, Dense(DataType::kFloat32, {4, 1}), 2, "trainer_id 2 is not in [0, 2) (Fanin)"});
  cases.push_back({w, Dense(DataType::kFloat32, {4, 1}), 0, "is a parameter here"});
  cases.push_back({wg + ".trainer_0", Dense(DataType::kFloat32, {4, 1}), 1, "which belongs to trainer 0"});
  {
    Variable sparse;
    SelectedRows* sr = sparse.GetMutable<SelectedRows>();
    sr->height = 4;
    sr->rows = {1};
    sr->value.mutable_data<float>({1, 1});
    cases.push_back({wg, sparse, 0, "the pserver receives it as a dense tensor"});
  }
  cases.push_back({wg, Variable(), 0, "it carries no value"});
  for (const auto& k : cases) {
    absl::Status st = send(k.name, k.v, k.tid);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(k.expect), std::string::npos) << st;
    EXPECT_NE(st.message().find(s.ep), std::string::npos) << st;
  }
  // Still serving: a good gradient is taken and parameters are served.
  EXPECT_TRUE(send(wg, Dense(DataType::kFloat32, {4, 1}), 1).ok());
  Variable got;
  absl::Status st = c.AsyncGetVar(s.ep, w, &got, 0)->Wait();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got.Get<Tensor>().dims(), (DDim{4, 1}));
  EXPECT_EQ(c.AsyncGetVar(s.ep, "nope", &got, 0)->Wait().code(), absl::StatusCode::kNotFound);
}

// A trainer that counts another number of trainers than the pserver's
// Fanin is refused at its first message, naming both counts, before the
// trainer_id check (trainer 2 of 3 is out of range only because of the
// count), and so is one that trains async against a sync pserver; a trainer
// that agrees, or a Fluid client that says neither, is served.
TEST(ParameterServerTest, ATrainerCountThatDiffersFromFaninIsRefusedAtOnce) {
  Server s;
  const std::string wg = "fc_0.w_0@GRAD";
  const Variable grad = Dense(DataType::kFloat32, {4, 1});
  for (const auto& [trainers, tid] : {std::pair<int64_t, int>{3, 2}, {1, 0}}) {
    rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .trainers = trainers});
    absl::Status st = c.AsyncSendVar(s.ep, wg, &grad, {.trainer_id = tid})->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find(absl::StrCat("pserver ", s.ep, " serves 2 trainer(s) (its Fanin) but trainer ", tid,
                                             " counts ", trainers,
                                             " in the job; start every trainer and pserver "
                                             "with the same PADDLE_TRAINERS_NUM")),
              std::string::npos)
        << st;
    Variable got;
    EXPECT_EQ(c.AsyncGetVar(s.ep, "fc_0.w_0", &got, tid, /*no_barrier=*/true)->Wait().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  // A trainer that trains async, against this sync pserver: refused too.
  rpc::RpcClient async(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .sync_mode = 2});
  absl::Status st = async.AsyncSendVar(s.ep, wg, &grad, {.trainer_id = 0})->Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("pserver " + s.ep +
                              " trains sync but trainer 0 trains async; start every trainer "
                              "and pserver with the same --async (or --sync)"),
            std::string::npos)
      << st;
  for (const auto& [trainers, tid] : {std::pair<int64_t, int>{2, 0}, {0, 1}}) {
    rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .trainers = trainers});
    absl::Status st = c.AsyncSendVar(s.ep, wg, &grad, {.trainer_id = tid})->Wait();
    EXPECT_TRUE(st.ok()) << trainers << ": " << st;
  }
}

// The trainers' settings, said in each one's first call, must be the first
// trainer's: another --seed is refused naming both values and both ids,
// the same settings (and calls that say none) are served.
TEST(ParameterServerTest, ATrainerWithOtherSettingsThanTheFirstIsRefused) {
  Server s;
  auto client = [&](const std::string& settings) {
    return std::make_unique<rpc::RpcClient>(
        &s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .job_settings = settings});
  };
  auto first = client("batch_size=64 seed=3"), same = client("batch_size=64 seed=3"),
       other = client("batch_size=64 seed=4");
  Variable w;
  ASSERT_TRUE(first->AsyncGetVar(s.ep, "fc_0.w_0", &w, 0, /*no_barrier=*/true)->Wait().ok());
  absl::Status st = other->AsyncGetVar(s.ep, "fc_0.w_0", &w, 1, /*no_barrier=*/true)->Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("pserver " + s.ep +
                              ": trainer 1 trains with --seed 4 but trainer 0 with --seed 3; "
                              "start every trainer with the same --batch_size, --seed"),
            std::string::npos)
      << st;
  EXPECT_TRUE(same->AsyncGetVar(s.ep, "fc_0.w_0", &w, 1, /*no_barrier=*/true)->Wait().ok());
  s.ps->Stop();
}

// The pserver's own error, when its barrier times out, says what it refused
// of each trainer: the likely reason a trainer never arrived (another
// trainer count; a Get of a parameter it does not hold, as from a trainer
// with the pserver list in another order). Over gRPC and over a stream
// transport, whose Gets take another path (TryHandleDeferred).
TEST(ParameterServerTest, ABarrierTimeoutSaysWhatItRefusedOfEachTrainer) {
  for (const char* wire : {"grpc", "tcp"}) {
    RunningServer s(wire, /*timeout_ms=*/300);
    rpc::RpcClient one(s.transport.get(), rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .trainers = 1});
    const Variable grad = Dense(DataType::kFloat32, {4, 1});
    EXPECT_EQ(one.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &grad, {.trainer_id = 0})->Wait().code(),
              absl::StatusCode::kFailedPrecondition);
    Variable param;  // a barrier Get, which a stream transport would park: refused at once too
    EXPECT_EQ(one.AsyncGetVar(s.ep, "fc_0.w_0", &param, 0)->Wait().code(), absl::StatusCode::kFailedPrecondition)
        << wire;
    rpc::RpcClient two(s.transport.get(), rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0, .trainers = 2});
    Variable got;
    EXPECT_EQ(two.AsyncGetVar(s.ep, "fc_9.w_0", &got, 1)->Wait().code(), absl::StatusCode::kNotFound) << wire;
    s.Join();
    EXPECT_TRUE(absl::IsDeadlineExceeded(s.result)) << wire << ": " << s.result;
    EXPECT_NE(s.result.message().find(absl::StrCat("; it refused trainer 0: pserver ", s.ep,
                                                   " serves 2 trainer(s) (its Fanin) but trainer 0 counts 1")),
              std::string::npos)
        << wire << ": " << s.result;
    EXPECT_NE(s.result.message().find("; it refused trainer 1: pserver " + s.ep +
                                      " (trainer 1): no parameter 'fc_9.w_0' to serve"),
              std::string::npos)
        << wire << ": " << s.result;
    EXPECT_NE(s.result.message().find("the same PADDLE_PSERVER_ENDPOINTS, in the same order?"), std::string::npos)
        << wire << ": " << s.result;
  }
}

// Regression: a Get could name any variable, a gradient included, and read
// it while a send swapped its buffer. Only parameters are served.
TEST(ParameterServerTest, GetsMayNameOnlyTheParametersItServes) {
  Server s;
  rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  for (const char* name : {"fc_0.w_0@GRAD", "fc_0.w_0@GRAD.trainer_0", "learning_rate_0"}) {
    Variable got;
    absl::Status st = c.AsyncGetVar(s.ep, name, &got, 0, /*no_barrier=*/true)->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << name << ": " << st;
    EXPECT_NE(st.message().find("a pserver serves only the parameters"), std::string::npos) << st;
  }
}

TEST(ParameterServerTest, CheckpointNotifySavesAWholeCheckpoint) {
  Server s;
  rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  const std::string dir = ::testing::TempDir() + "/oar_ps_ckpt";
  std::filesystem::remove_all(dir);
  absl::Status st = c.AsyncCheckpointNotify(s.ep, dir, 0)->Wait();
  ASSERT_TRUE(st.ok()) << st;
  const std::string own = dir + "/pserver_0";  // each pserver in its own directory
  EXPECT_TRUE(std::filesystem::exists(own + "/__manifest__"));
  std::ifstream manifest(own + "/__manifest__");
  const std::string listed((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
  EXPECT_NE(listed.find("fc_0.w_0 float32 4,1"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("@GRAD"), std::string::npos) << listed;  // gradients are not state
  EXPECT_NE(listed.find("@OAR_PSERVER_STEP@ int64 1"), std::string::npos) << listed;
  Scope fresh;
  Executor exe;
  ASSERT_TRUE(exe.Run(s.d.startup.desc(), &fresh).ok());
  PserverConfig config;
  config.grad_to_block_id =
      *ParseGradToBlockId(s.d.pserver.Block(0).Op(0).GetAttr<std::vector<std::string>>("grad_to_block_id"));
  auto loaded = LoadPserverCheckpoint(exe, &fresh, own, s.d.pserver, config);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, 0);  // no optimize pass yet
  const std::string w = s.d.params_grads[0].first;
  EXPECT_EQ(TensorToVector<float>(fresh.FindVar(w)->Get<Tensor>()),
            TensorToVector<float>(s.scope.FindVar(w)->Get<Tensor>()));
  EXPECT_EQ(c.AsyncCheckpointNotify(s.ep, "", 0)->Wait().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParameterServerTest, StopEndsRunCleanly) {
  Server s;
  absl::Status result = absl::UnknownError("not run");
  std::thread t([&] { result = s.ps->Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s.ps->Stop();
  t.join();
  EXPECT_TRUE(result.ok()) << result;
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(ParameterServerTest, GetVariableNoBarrierDoesNotWaitForTheStep) {
  Server s;
  rpc::RpcClient c(&s.transport, rpc::ClientOptions{.deadline_ms = 3000, .retry_times = 0});
  // Trainer 0 has announced its batch: a plain Get now waits for the
  // optimize (which never comes here); the no-barrier Get answers at once.
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 0)->Wait().ok());
  Variable got;
  absl::Status st = c.AsyncGetVar(s.ep, "fc_0.w_0", &got, 0, /*no_barrier=*/true)->Wait();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got.Get<Tensor>().dims(), (DDim{4, 1}));
  rpc::RpcClient quick(&s.transport, rpc::ClientOptions{.deadline_ms = 300, .retry_times = 0});
  EXPECT_EQ(quick.AsyncGetVar(s.ep, "fc_0.w_0", &got, 0)->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  s.ps->Stop();  // releases the waiting Get before the server shuts down
}

// A trainer that restarted sends from a new RpcClient (a new incarnation in
// its sequence numbers): what its earlier run still sends is refused before
// anything is stored, so it cannot stand in for the new run's gradients.
TEST(ParameterServerTest, AGradientFromARunThatRestartedIsRefused) {
  Server s;
  const rpc::ClientOptions quick{.deadline_ms = 5000, .retry_times = 0};
  rpc::RpcClient earlier(&s.transport, quick), now(&s.transport, quick);
  const Variable g = Dense(DataType::kFloat32, {4, 1});
  ASSERT_TRUE(earlier.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 0})->Wait().ok());
  ASSERT_TRUE(now.AsyncSendBatchBarrier(s.ep, 0)->Wait().ok());  // trainer 0's new run
  for (const char* name : {"fc_0.w_0@GRAD", rpc::kBatchBarrier}) {
    absl::Status st =
        earlier.AsyncSendVar(s.ep, name, name == rpc::kBatchBarrier ? nullptr : &g, {.trainer_id = 0})->Wait();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << name << ": " << st;
    EXPECT_NE(st.message().find("an earlier run of trainer 0, which has restarted since"), std::string::npos) << st;
  }
  EXPECT_TRUE(now.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait().ok()) << "others go on";
  s.ps->Stop();
}

}  // namespace
}  // namespace oar
