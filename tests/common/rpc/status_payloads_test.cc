// Status payloads: what an error's typed facts look like in bytes and back,
// that only Oar's ("oar/") travel, that a peer's malformed or oversized
// bytes cost nothing but themselves, and that rewrapping an error (Annotate,
// an RPC's final status) keeps them. The transports carry them in
// tests/pserver/trainer_abort_test.cc (gRPC and TCP).
#include "common/rpc/status_payloads.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

TEST(StatusPayloadsTest, AJobStopsAnswerNamesItsTrainerThroughBytesAndRewraps) {
  const absl::Status s = JobStops(3, "trainer 3 failed, so the job stops: oom");
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_EQ(JobStoppedBy(s), 3);
  absl::Status back = absl::FailedPreconditionError(s.message());
  EXPECT_FALSE(JobStoppedBy(back).has_value()) << "the words alone name nobody";
  DecodePayloads(EncodePayloads(s), &back);
  EXPECT_EQ(JobStoppedBy(back), 3);
  EXPECT_EQ(JobStoppedBy(Annotate(Annotate(back, "op send"), "step 4")), 3);
  EXPECT_EQ(JobStoppedBy(Rewrap(back, "something else")), 3);
}

TEST(StatusPayloadsTest, OnlyTypedJobStopsOfAFailedPreconditionCount) {
  absl::Status other = absl::UnavailableError("x");
  other.SetPayload(kJobStopsUrl, absl::Cord("2"));
  EXPECT_FALSE(JobStoppedBy(other).has_value());
  absl::Status garbled = absl::FailedPreconditionError("x");
  garbled.SetPayload(kJobStopsUrl, absl::Cord("two"));
  EXPECT_FALSE(JobStoppedBy(garbled).has_value());
  garbled.SetPayload(kJobStopsUrl, absl::Cord("-1"));
  EXPECT_FALSE(JobStoppedBy(garbled).has_value());
  EXPECT_FALSE(JobStoppedBy(absl::OkStatus()).has_value());
}

TEST(StatusPayloadsTest, OnlyOarsPayloadsTravel) {
  absl::Status s = absl::InternalError("x");
  s.SetPayload("type.googleapis.com/other", absl::Cord("secret"));
  s.SetPayload("oar/a", absl::Cord("1"));
  s.SetPayload("oar/multi", absl::Cord("line\nbreak"));  // cannot be written as a line: left out
  EXPECT_EQ(EncodePayloads(s), "oar/a\t1\n");
  EXPECT_EQ(EncodePayloads(absl::InternalError("none")), "");
}

TEST(StatusPayloadsTest, APeersMalformedBytesAreDroppedNotTheError) {
  absl::Status s = absl::InternalError("the error");
  const std::string big(300, 'v');
  DecodePayloads(absl::StrCat("no tab here\n", "other/url\t1\n", "oar/big\t", big, "\n", "oar/ok\t7\n", "\t\n"), &s);
  EXPECT_EQ(s.message(), "the error");
  EXPECT_EQ(s.GetPayload("oar/ok"), absl::Cord("7"));
  EXPECT_FALSE(s.GetPayload("oar/big").has_value());
  EXPECT_FALSE(s.GetPayload("other/url").has_value());
  // At most kMaxPayloads are taken, however many a peer sends.
  absl::Status many = absl::InternalError("x");
  std::string bytes;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&bytes, "oar/p", i, "\t", i, "\n");
  DecodePayloads(bytes, &many);
  int n = 0;
  many.ForEachPayload([&n](absl::string_view, const absl::Cord&) { ++n; });
  EXPECT_EQ(n, static_cast<int>(kMaxPayloads));
  // An OK status takes none.
  absl::Status ok = absl::OkStatus();
  DecodePayloads("oar/a\t1\n", &ok);
  EXPECT_TRUE(ok.ok());
}

}  // namespace
}  // namespace oar::rpc
