// A caller's burst of requests wakes each server once (wake_debts.h): a
// request its caller will wait for is written with the server left asleep
// (WriteMore) and owed, and the first Await — on any connection of the
// client — pays every connection's debt before it sleeps, so a trainer
// waiting on pserver 0's reply has already woken pserver 1 too. A request
// nobody will wait for is written as before.
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/stream/client_conn.h"
#include "common/rpc/stream/wake_debts.h"
#include "gtest/gtest.h"
#include "tests/util/header_only_request.h"

namespace oar::rpc::stream {
namespace {

// A connection's stream that takes every write and counts how: no peer, no
// reply (a wait ends at its deadline).
class CountingStream final : public ByteStream {
 public:
  struct Counts {
    int writes = 0, writes_more = 0, flushes = 0;
  };
  explicit CountingStream(std::shared_ptr<Counts> counts) : counts_(std::move(counts)) {}
  absl::Status Read(void*, size_t, absl::Time) override { return absl::DeadlineExceededError("no peer"); }
  absl::Status Write(const std::vector<ConstPiece>&, absl::Time) override {
    ++counts_->writes;
    return absl::OkStatus();
  }
  absl::Status WriteMore(const std::vector<ConstPiece>&, absl::Time) override {
    ++counts_->writes_more;
    return absl::OkStatus();
  }
  void Flush() override { ++counts_->flushes; }
  bool CanWaitReadable() const override { return true; }
  bool DefersWakeups() const override { return true; }
  absl::Status WaitReadable(absl::Time) override { return absl::DeadlineExceededError("no reply"); }
  bool Readable() override { return false; }
  void Close() override {}
  const std::string& peer() const override { return peer_; }

 private:
  std::shared_ptr<Counts> counts_;
  std::string peer_ = "counting";
};

std::shared_ptr<const OutgoingMessage> Send(const std::string& name) { return HeaderOnlyRequest(name); }

CallDone Ignore() {
  return [](absl::Status, std::unique_ptr<IncomingMessage>) {};
}

TEST(WakeDebtsTest, TheFirstWaitWakesEveryServerTheCallerLeftAsleep) {
  auto debts = std::make_shared<WakeDebts>();
  auto a = std::make_shared<CountingStream::Counts>(), b = std::make_shared<CountingStream::Counts>();
  auto conn_a = std::make_shared<ClientConn>(std::make_unique<CountingStream>(a), "a", debts);
  auto conn_b = std::make_shared<ClientConn>(std::make_unique<CountingStream>(b), "b", debts);
  const absl::Time later = absl::Now() + absl::Seconds(30);
  // The burst: two requests to b, one to a, each to be waited for.
  std::vector<std::unique_ptr<ReplyReader>> readers;
  readers.push_back(conn_b->Call(RpcKind::kSend, Send("g0"), later, Ignore(), /*claim=*/true));
  readers.push_back(conn_b->Call(RpcKind::kSend, Send(kBatchBarrier), later, Ignore(), true));
  readers.push_back(conn_a->Call(RpcKind::kSend, Send(kBatchBarrier), later, Ignore(), true));
  EXPECT_EQ(b->writes_more, 2);
  EXPECT_EQ(a->writes_more, 1);
  EXPECT_EQ(a->flushes + b->flushes, 0);  // nobody woken yet
  // Waiting for a's reply wakes b as well, before it sleeps.
  readers[2]->Await(absl::Now());
  EXPECT_EQ(a->flushes, 1);
  EXPECT_EQ(b->flushes, 1);
  // Paid once: the next wait owes nothing more.
  readers[0]->Await(absl::Now());
  EXPECT_EQ(a->flushes + b->flushes, 2);
  // A call nobody waits for (Transport::Call's) is written with its wake-up.
  EXPECT_EQ(conn_a->Call(RpcKind::kSend, Send(kComplete), later, Ignore(), /*claim=*/false), nullptr);
  EXPECT_EQ(a->writes, 1);
  EXPECT_EQ(a->writes_more, 1);
}

TEST(WakeDebtsTest, ADebtOfAConnectionAlreadyGoneIsDropped) {
  WakeDebts debts;
  auto counts = std::make_shared<CountingStream::Counts>();
  {
    auto conn = std::make_shared<ClientConn>(std::make_unique<CountingStream>(counts), "gone");
    debts.Owe(conn);
  }
  debts.PayAll();  // nothing to wake, nothing touched
  EXPECT_EQ(counts->flushes, 0);
}

}  // namespace
}  // namespace oar::rpc::stream
