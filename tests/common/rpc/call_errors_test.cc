// IsRefusal and CallErrors: of several calls waited in turn, the error a
// trainer reports is a server's refusal (its reason) before an unreachable
// server, a deadline, a restart being recovered, or a call a stopping
// server dropped unanswered; with no refusal, the first error.
#include "common/rpc/rpc_common.h"

#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

TEST(CallErrorsTest, OnlyAnAnswerThatSaysWhyIsARefusal) {
  EXPECT_TRUE(IsRefusal(absl::FailedPreconditionError("trainer 0 failed, so the job stops: disk full")));
  EXPECT_TRUE(IsRefusal(absl::InvalidArgumentError("'w@GRAD' has dims [3] but the program declares [4]")));
  EXPECT_TRUE(IsRefusal(absl::AlreadyExistsError("was already stopping")));
  for (const absl::Status& s :
       {absl::OkStatus(), absl::UnavailableError("connection refused"), absl::DeadlineExceededError("deadline"),
        absl::ResourceExhaustedError("busy"), absl::AbortedError("restarted"), absl::CancelledError("shut down")}) {
    EXPECT_FALSE(IsRefusal(s)) << s;
  }
}

TEST(CallErrorsTest, ARefusalWinsOverAnEarlierUnreachableServer) {
  CallErrors e;
  EXPECT_TRUE(e.status().ok());
  e.Update(absl::OkStatus());
  e.Update(absl::UnavailableError("pserver 0: connection refused"));
  e.Update(absl::CancelledError("pserver 0: the stream transport shut down"));
  e.Update(absl::FailedPreconditionError("pserver 1: trainer 0 failed, so the job stops: disk full"));
  e.Update(absl::FailedPreconditionError("pserver 1: a later refusal"));
  EXPECT_EQ(e.status(), absl::FailedPreconditionError("pserver 1: trainer 0 failed, so the job stops: disk full"));
}

TEST(CallErrorsTest, WithoutARefusalTheFirstErrorIsReported) {
  CallErrors e;
  e.Update(absl::DeadlineExceededError("pserver 0: no answer by the deadline"));
  e.Update(absl::UnavailableError("pserver 1: connection refused"));
  e.Update(absl::AbortedError("pserver 1 restarted"));
  EXPECT_EQ(e.status(), absl::DeadlineExceededError("pserver 0: no answer by the deadline"));
}

}  // namespace
}  // namespace oar::rpc
