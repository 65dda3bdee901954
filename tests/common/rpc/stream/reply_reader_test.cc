// Who reads a stream connection's replies (client_conn.h), through
// SelectingTransport as RpcClient uses it: a caller that waits reads its own
// reply on its own thread; a reply nobody waits for yet — a call made with
// Transport::Call, a claimed call whose caller has not come to wait, one
// whose ReplyReader was dropped — still ends its call; a waiter gives up at
// its deadline; callers on several threads take turns on one connection and
// every value comes back to its own caller. Over tcp and shm; TLS streams
// offer no ReplyReader.
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "tests/util/header_only_request.h"

namespace oar::rpc {
namespace {

// Get "v<base>_<n>": n floats base, base+1, ...; "slow..." answers after 300 ms.
class CountingHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind /*kind*/, const IncomingMessage& req, Reply* reply) override {
    const std::string& name = req.header().name();
    if (absl::StartsWith(name, "slow")) absl::SleepFor(absl::Milliseconds(300));
    std::vector<std::string> parts = absl::StrSplit(name.substr(name.find('v') + 1), '_');
    int base = 0, n = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &base) || !absl::SimpleAtoi(parts[1], &n)) {
      return absl::InvalidArgumentError(absl::StrCat("bad name '", name, "'"));
    }
    reply->name = name;
    float* p = reply->var.GetMutable<Tensor>()->mutable_data<float>({n});
    for (int i = 0; i < n; ++i) p[i] = static_cast<float>(base + i);
    return absl::OkStatus();
  }
};

std::shared_ptr<const OutgoingMessage> Get(const std::string& name) { return HeaderOnlyRequest(name); }

// One attempt's outcome, as a transport hands it over.
struct Outcome {
  absl::Notification done;
  absl::Status status;
  std::unique_ptr<IncomingMessage> reply;
  std::thread::id thread;
  CallDone Callback() {
    return [this](absl::Status s, std::unique_ptr<IncomingMessage> r) {
      status = std::move(s);
      reply = std::move(r);
      thread = std::this_thread::get_id();
      done.Notify();
    };
  }
  // Whether it ended OK with n floats base, base+1, ...
  bool Holds(int base, int n) {
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(20)) || !status.ok() || reply == nullptr) return false;
    Variable v;
    reply->DecodeInto(&v);
    const Tensor& t = v.Get<Tensor>();
    if (t.numel() != n) return false;
    for (int i = 0; i < n; ++i) {
      if (t.data<float>()[i] != static_cast<float>(base + i)) return false;
    }
    return true;
  }
};

class ReplyReaderTest : public ::testing::TestWithParam<TransportMode> {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.endpoint = "127.0.0.1:0";
    auto l = server_.Listen(o, &handler_);
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = *std::move(l);
    ep_ = listener_->endpoint();
    ASSERT_TRUE(client_.WaitReady(ep_, absl::Now() + absl::Seconds(10)).ok());
    ASSERT_EQ(client_.ChosenFor(ep_), TransportModeName(GetParam()));
  }
  absl::Time Deadline() const { return absl::Now() + absl::Seconds(20); }

  CountingHandler handler_;
  SelectingTransport server_{TransportMode::kAuto, {}};
  std::unique_ptr<Listener> listener_;
  SelectingTransport client_{GetParam(), {}};
  std::string ep_;
};

TEST_P(ReplyReaderTest, AWaitingCallerReadsItsOwnReply) {
  constexpr int kCalls = 20;
  int on_caller = 0;
  for (int i = 0; i < kCalls; ++i) {
    Outcome out;
    const absl::Time deadline = Deadline();
    auto reader =
        client_.CallForWaiter(RpcKind::kGet, ep_, Get(absl::StrCat("v", i, "_", 1000)), deadline, out.Callback());
    ASSERT_NE(reader, nullptr) << "the stream transport offers no reader";
    reader->Await(deadline);
    ASSERT_TRUE(out.Holds(i, 1000)) << "call " << i << ": " << out.status;
    on_caller += out.thread == std::this_thread::get_id();
  }
  // Every reply came to a caller already waiting; only a sweep landing
  // between a call and its wait (a thread preempted that long) hands one
  // to the reader thread.
  EXPECT_GE(on_caller, kCalls / 2) << "replies are read by the reader thread, not by their waiting callers";
}

TEST_P(ReplyReaderTest, RepliesNobodyWaitsForStillEndTheirCalls) {
  Outcome plain, kept, dropped;
  client_.Call(RpcKind::kGet, ep_, Get("v1_10"), Deadline(), plain.Callback());  // Transport::Call: nobody will wait
  auto kept_reader = client_.CallForWaiter(RpcKind::kGet, ep_, Get("v2_300000"), Deadline(), kept.Callback());
  ASSERT_NE(kept_reader, nullptr);
  client_.CallForWaiter(RpcKind::kGet, ep_, Get("v3_20"), Deadline(), dropped.Callback()).reset();
  EXPECT_TRUE(plain.Holds(1, 10)) << plain.status;
  EXPECT_TRUE(kept.Holds(2, 300000)) << kept.status;  // read after a sweep found it: its caller never waited
  EXPECT_TRUE(dropped.Holds(3, 20)) << dropped.status;
  kept_reader->Await(Deadline());  // the call has ended: returns at once
  // And the connection goes on.
  Outcome after;
  auto reader = client_.CallForWaiter(RpcKind::kGet, ep_, Get("v4_5"), Deadline(), after.Callback());
  reader->Await(Deadline());
  EXPECT_TRUE(after.Holds(4, 5)) << after.status;
}

TEST_P(ReplyReaderTest, AWaiterGivesUpAtItsDeadlineAndTheCallEndsDeadlineExceeded) {
  Outcome late;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  auto reader = client_.CallForWaiter(RpcKind::kGet, ep_, Get("slow_v5_5"), deadline, late.Callback());
  reader->Await(deadline);
  EXPECT_GE(absl::Now(), deadline);
  ASSERT_TRUE(late.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status)) << late.status;
  // The late reply is skipped; the next call gets its own.
  Outcome next;
  auto r2 = client_.CallForWaiter(RpcKind::kGet, ep_, Get("v6_7"), Deadline(), next.Callback());
  r2->Await(Deadline());
  EXPECT_TRUE(next.Holds(6, 7)) << next.status;
}

TEST_P(ReplyReaderTest, CallersOnManyThreadsTakeTurnsAndGetTheirOwnValues) {
  constexpr int kThreads = 4, kCalls = 40;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const int base = t * 1000 + i, n = 1 + (i * 7919 + t * 31) % 200000;  // up to 800 KB: frames of many reads
        // Two in flight, waited for in the opposite order; every fourth
        // thread's second call is one nobody waits for.
        Outcome a, b;
        auto ra =
            client_.CallForWaiter(RpcKind::kGet, ep_, Get(absl::StrCat("v", base, "_", n)), Deadline(), a.Callback());
        std::unique_ptr<ReplyReader> rb;
        if (t == 3) {
          client_.Call(RpcKind::kGet, ep_, Get(absl::StrCat("v", base + 1, "_", 3)), Deadline(), b.Callback());
        } else {
          rb = client_.CallForWaiter(RpcKind::kGet, ep_, Get(absl::StrCat("v", base + 1, "_", 3)), Deadline(),
                                     b.Callback());
        }
        if (rb != nullptr) rb->Await(Deadline());
        ra->Await(Deadline());
        wrong += !a.Holds(base, n);
        wrong += !b.Holds(base + 1, 3);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, ReplyReaderTest, ::testing::Values(TransportMode::kTcp, TransportMode::kShm),
                         [](const auto& info) { return std::string(TransportModeName(info.param)); });

}  // namespace
}  // namespace oar::rpc
