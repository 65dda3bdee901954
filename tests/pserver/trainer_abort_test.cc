// A trainer that fails says ABORT@RECV with its reason: the pserver ends
// the job at once — the other trainer's waiting Get and its later calls are
// answered with that reason, and Run fails with it once that trainer has
// echoed the ABORT (or kEchoGrace after it was told) — rather than at its
// barrier's timeout. An ABORT from a trainer that had completed, or from a
// process of it that a later one replaced, does not end the job. Over gRPC
// and over a stream transport (which parks barrier Gets), sync and async.
#include "pserver/parameter_server.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/status_payloads.h"
#include "gtest/gtest.h"
#include "tests/pserver/running_server.h"

namespace oar {
namespace {

const char kReason[] = "checkpoint after step 3: disk full";
// Long enough that a job that waited for its barrier's timeout would not
// end within the test's expectations (Run's result would be DEADLINE_EXCEEDED);
// a pserver stops once every live trainer heard the reason.
constexpr int kTimeoutMs = 60000;

class TrainerAbortTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainerAbortTest, ASyncJobEndsAtOnceWithTheFailedTrainersReason) {
  RunningServer s(GetParam(), kTimeoutMs);
  rpc::RpcClient c(s.transport.get(),
                   rpc::ClientOptions{.deadline_ms = kTimeoutMs, .retry_times = 0, .trainers = 2, .sync_mode = 1});
  Variable w;
  for (int t = 0; t < 2; ++t) ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());  // the initial pull ends
  // Trainer 1 pushes its step and waits for the parameters, which need
  // trainer 0's gradients too.
  Variable g = Floats({4, 1}, {0.5f, -1.25f, 2.0f, 0.125f});
  ASSERT_TRUE(c.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 1)->Wait().ok());
  auto get = c.AsyncGetVar(s.ep, "fc_0.w_0", &w, 1);
  // Trainer 0 fails; the ABORT comes from a client of its own, with the
  // incarnation of the trainer's calls (as the failed process sends it,
  // cli/trainer_failure.h), and says neither the trainer count nor the mode.
  rpc::RpcClient failed(s.transport.get(), {.incarnation = c.incarnation()});
  ASSERT_TRUE(failed.AsyncSendAbort(s.ep, 0, absl::InternalError(kReason))->Wait().ok());
  const std::string why = absl::StrCat("trainer 0 failed, so the job stops: ", kReason);
  absl::Status waited = get->Wait();
  EXPECT_EQ(waited.code(), absl::StatusCode::kFailedPrecondition) << waited;
  EXPECT_NE(waited.message().find(why), std::string::npos) << waited;
  EXPECT_EQ(rpc::JobStoppedBy(waited), 0) << "the answer names the failed trainer as a typed payload";
  // Trainer 1's next call (one it sent before it read that answer) is
  // refused with the reason too; its own ABORT, an echo of trainer 0's, is
  // told the job was already stopping — and, every live trainer having
  // stopped, Run ends.
  absl::Status next = c.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait();
  EXPECT_NE(next.message().find(why), std::string::npos) << next;
  EXPECT_EQ(rpc::JobStoppedBy(next), 0) << next;
  absl::Status echo = c.AsyncSendAbort(s.ep, 1, waited)->Wait();
  EXPECT_EQ(echo.code(), absl::StatusCode::kAlreadyExists) << echo;
  EXPECT_NE(echo.message().find(why), std::string::npos) << echo;
  s.Join();
  EXPECT_EQ(s.result.code(), absl::StatusCode::kFailedPrecondition) << s.result;
  EXPECT_NE(s.result.message().find(absl::StrCat("pserver ", s.ep, ": ", why)), std::string::npos) << s.result;
  EXPECT_EQ(s.ps->stats().steps, 0) << "no step without trainer 0's gradients";
  // Once the pserver is gone, a call that cannot reach it says what it
  // answered last: the reason the job stopped.
  s.ps.reset();
  absl::Status gone = c.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait();
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
  EXPECT_NE(gone.message().find("; before that it answered: "), std::string::npos) << gone;
  EXPECT_NE(gone.message().find(why), std::string::npos) << gone;
}

// Also: once trainer 1 was told, Run waits for its echo (here for as long
// as the deadline), and ends on it.
TEST_P(TrainerAbortTest, AnAsyncJobEndsWithTheFailedTrainersReason) {
  RunningServer s(GetParam(), kTimeoutMs, /*sync=*/false, /*abort_echo_grace_ms=*/kTimeoutMs);
  rpc::RpcClient c(s.transport.get(),
                   rpc::ClientOptions{.deadline_ms = kTimeoutMs, .retry_times = 0, .trainers = 2, .sync_mode = 2});
  Variable g = Floats({4, 1}, {0.5f, -1.25f, 2.0f, 0.125f});
  ASSERT_TRUE(c.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait().ok());
  rpc::RpcClient failed(s.transport.get());  // trainer 0 failed before its first call
  ASSERT_TRUE(failed.AsyncSendAbort(s.ep, 0, absl::InternalError(kReason))->Wait().ok());
  // Trainer 1's next call hears why; then the pserver, having told every
  // live trainer, stops serving.
  Variable w;
  absl::Status get = c.AsyncGetVar(s.ep, "fc_0.w_0", &w, 1)->Wait();
  EXPECT_EQ(get.code(), absl::StatusCode::kFailedPrecondition) << get;
  EXPECT_NE(get.message().find(absl::StrCat("trainer 0 failed, so the job stops: ", kReason)), std::string::npos)
      << get;
  EXPECT_FALSE(s.ended.load()) << "Run ended before trainer 1 stopped: " << s.result;
  const absl::Time echoed = absl::Now();
  EXPECT_TRUE(absl::IsAlreadyExists(c.AsyncSendAbort(s.ep, 1, get)->Wait()));
  s.Join();
  // Not the grace's 60 s: the echo ended it (the margin is for a loaded machine).
  EXPECT_LT(absl::Now() - echoed, absl::Seconds(30));
  EXPECT_EQ(s.result.code(), absl::StatusCode::kFailedPrecondition) << s.result;
  EXPECT_NE(s.result.message().find(absl::StrCat("trainer 0 failed, so the job stops: ", kReason)), std::string::npos)
      << s.result;
}

TEST_P(TrainerAbortTest, AnAbortFromACompletedTrainerOrAReplacedProcessLeavesTheJobRunning) {
  RunningServer s(GetParam(), kTimeoutMs);
  const rpc::ClientOptions quick{.deadline_ms = 10000, .retry_times = 0};
  rpc::RpcClient c(s.transport.get(), quick);
  // Trainer 0 completes, then fails (say, writing its results): nothing
  // waits for it any more.
  ASSERT_TRUE(c.AsyncSendComplete(s.ep, 0)->Wait().ok());
  absl::Status after = c.AsyncSendAbort(s.ep, 0, absl::InternalError("writing its results"))->Wait();
  EXPECT_EQ(after.code(), absl::StatusCode::kAlreadyExists) << after;
  EXPECT_NE(after.message().find("trainer 0 had completed; the job goes on"), std::string::npos) << after;
  // Trainer 1 restarted: its earlier process's late ABORT is refused.
  rpc::RpcClient earlier(s.transport.get(), quick), now(s.transport.get(), quick);
  ASSERT_TRUE(earlier.AsyncSendFetchBarrier(s.ep, 1)->Wait().ok());  // the initial pull ends
  Variable g = Floats({4, 1}, {1, 2, 3, 4}), b = Floats({1}, {1}), w;
  ASSERT_TRUE(now.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 1})->Wait().ok());
  // Its ABORT, as the old process sends it: from a client of its own with
  // the old run's incarnation.
  rpc::RpcClient earlier_abort(s.transport.get(), {.incarnation = earlier.incarnation()});
  absl::Status late = earlier_abort.AsyncSendAbort(s.ep, 1, absl::InternalError("a process since replaced"))->Wait();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("an ABORT from an earlier process of trainer 1"), std::string::npos) << late;
  // The job goes on: trainer 1 ends its step alone and completes.
  ASSERT_TRUE(now.AsyncSendVar(s.ep, "fc_0.b_0@GRAD", &b, {.trainer_id = 1})->Wait().ok());
  ASSERT_TRUE(now.AsyncSendBatchBarrier(s.ep, 1)->Wait().ok());
  absl::Status got = now.AsyncGetVar(s.ep, "fc_0.w_0", &w, 1)->Wait();
  EXPECT_TRUE(got.ok()) << got;
  ASSERT_TRUE(now.AsyncSendComplete(s.ep, 1)->Wait().ok());
  s.Join();
  EXPECT_TRUE(s.result.ok()) << s.result;
  EXPECT_EQ(s.ps->stats().steps, 1);
}

// Trainer 1 heard from another pserver that trainer 0 failed (that answer
// named trainer 0 as a typed payload), and stopped; its ABORT reaches this
// pserver before trainer 0's and says whose failure it passes on
// (oar_abort_origin): the job stops naming trainer 0 as the one that
// failed, not trainer 1.
TEST_P(TrainerAbortTest, AnEchoedAbortStopsTheJobNamingTheTrainerThatFailed) {
  RunningServer s(GetParam(), kTimeoutMs, /*sync=*/false);
  rpc::RpcClient c(s.transport.get(),
                   rpc::ClientOptions{.deadline_ms = kTimeoutMs, .retry_times = 0, .trainers = 2, .sync_mode = 2});
  Variable g = Floats({4, 1}, {0.5f, -1.25f, 2.0f, 0.125f});
  ASSERT_TRUE(c.AsyncSendVar(s.ep, "fc_0.w_0@GRAD", &g, {.trainer_id = 0})->Wait().ok());
  const std::string heard = absl::StrCat(
      "send 'fc_0.w_0@GRAD' to 127.0.0.1:1 failed: pserver 127.0.0.1:1: "
      "trainer 0 failed, so the job stops: ",
      kReason);
  rpc::RpcClient echo(s.transport.get(), {.incarnation = c.incarnation()});
  ASSERT_TRUE(echo.AsyncSendAbort(s.ep, 1, rpc::JobStops(0, heard))->Wait().ok());
  Variable w;
  absl::Status get = c.AsyncGetVar(s.ep, "fc_0.w_0", &w, 0)->Wait();
  EXPECT_NE(get.message().find(absl::StrCat("the job stops, as trainer 1 heard: ", heard)), std::string::npos) << get;
  EXPECT_EQ(get.message().find("trainer 1 failed"), std::string::npos) << get;
  EXPECT_EQ(rpc::JobStoppedBy(get), 0) << get;
  EXPECT_TRUE(absl::IsAlreadyExists(c.AsyncSendAbort(s.ep, 0, get)->Wait()));  // trainer 0's echo
  s.Join();
  EXPECT_NE(s.result.message().find("the job stops, as trainer 1 heard: "), std::string::npos) << s.result;
}

// Whose failure an ABORT reports is its typed field, not its wording: a
// trainer's own error that quotes a pserver's words is its own failure, and
// an origin naming no trainer of the job is refused, the job going on.
TEST_P(TrainerAbortTest, AnAbortsOriginIsItsTypedFieldNotItsWording) {
  RunningServer s(GetParam(), kTimeoutMs, /*sync=*/false);
  rpc::RpcClient c(s.transport.get(),
                   rpc::ClientOptions{.deadline_ms = kTimeoutMs, .retry_times = 0, .trainers = 2, .sync_mode = 2});
  absl::Status bad = c.AsyncSendVar(s.ep, rpc::kAbort, nullptr, {.trainer_id = 1, .abort_origin = 3})->Wait();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_NE(bad.message().find("oar_abort_origin 3 names no trainer"), std::string::npos) << bad;
  const std::string quoted = "my log said: trainer 0 failed, so the job stops: disk full";
  ASSERT_TRUE(c.AsyncSendAbort(s.ep, 1, absl::InternalError(quoted))->Wait().ok());
  Variable w;
  absl::Status get = c.AsyncGetVar(s.ep, "fc_0.w_0", &w, 0)->Wait();
  EXPECT_NE(get.message().find(absl::StrCat("trainer 1 failed, so the job stops: ", quoted)), std::string::npos) << get;
  EXPECT_EQ(rpc::JobStoppedBy(get), 1) << get;
  EXPECT_TRUE(absl::IsAlreadyExists(c.AsyncSendAbort(s.ep, 0, get)->Wait()));
  s.Join();
  EXPECT_EQ(rpc::JobStoppedBy(s.result), 1) << s.result;
}

INSTANTIATE_TEST_SUITE_P(Transports, TrainerAbortTest, ::testing::Values("grpc", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace oar
