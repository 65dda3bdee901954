// ShmRing moves bytes exactly, in order, through a ring much smaller than
// the data (wrap-around, full and empty waits, pieces of every size), and
// its waits end on Close and at the deadline.
#include "common/rpc/stream/shm_ring.h"

#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace oar::rpc::stream {
namespace {

struct Memory {
  explicit Memory(size_t capacity) : bytes(ShmRing::BytesFor(capacity)) { ptr = std::aligned_alloc(64, bytes); }
  ~Memory() { std::free(ptr); }
  size_t bytes;
  void* ptr;
};

absl::Status Alive() { return absl::OkStatus(); }

TEST(ShmRingTest, MovesEveryByteInOrderThroughASmallRing) {
  constexpr size_t kCapacity = 64 << 10, kTotal = 24 << 20;
  Memory m(kCapacity);
  ShmRing producer(m.ptr, kCapacity, /*init=*/true), consumer(m.ptr, kCapacity, /*init=*/false);
  std::vector<uint8_t> data(kTotal);
  std::mt19937 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::thread writer([&] {
    std::mt19937 sizes(11);
    size_t at = 0;
    while (at < kTotal) {
      // Several pieces per write, from one byte to several rings' worth.
      std::vector<ConstPiece> pieces;
      for (int i = 0; i < 3 && at < kTotal; ++i) {
        const size_t n = std::min<size_t>(kTotal - at, 1 + sizes() % (3 * kCapacity));
        pieces.push_back({data.data() + at, n});
        at += n;
      }
      ASSERT_TRUE(producer.Write(pieces, absl::Now() + absl::Seconds(30), Alive).ok());
    }
  });
  std::vector<uint8_t> got(kTotal);
  std::mt19937 sizes(13);
  size_t at = 0;
  while (at < kTotal) {
    const size_t n = std::min<size_t>(kTotal - at, 1 + sizes() % (2 * kCapacity));
    ASSERT_TRUE(consumer.Read(got.data() + at, n, absl::Now() + absl::Seconds(30), Alive).ok());
    at += n;
  }
  writer.join();
  EXPECT_TRUE(got == data);
}

TEST(ShmRingTest, AnEmptyReadEndsAtItsDeadlineAndOnClose) {
  Memory m(1 << 16);
  ShmRing ring(m.ptr, 1 << 16, true);
  char c;
  const absl::Time start = absl::Now();
  absl::Status s = ring.Read(&c, 1, absl::Now() + absl::Milliseconds(120), Alive);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ring.Close();
  });
  s = ring.Read(&c, 1, absl::InfiniteFuture(), Alive);
  closer.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
}

TEST(ShmRingTest, AFullWriteGivesUpWhenThePeerIsGone) {
  constexpr size_t kCapacity = 1 << 16;
  Memory m(kCapacity);
  ShmRing ring(m.ptr, kCapacity, true);
  std::vector<char> big(2 * kCapacity);
  int checks = 0;
  absl::Status s = ring.Write({{big.data(), big.size()}}, absl::InfiniteFuture(),
                              [&] { return ++checks < 3 ? absl::OkStatus() : absl::UnavailableError("peer died"); });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(checks, 3);
}

// What the producer may write without waiting: the capacity less what is
// published and not yet consumed.
TEST(ShmRingTest, WritableIsTheRoomLeft) {
  constexpr size_t kCapacity = 1 << 16;
  Memory m(kCapacity);
  ShmRing producer(m.ptr, kCapacity, true), consumer(m.ptr, kCapacity, false);
  EXPECT_EQ(producer.Writable(), kCapacity);
  std::vector<char> bytes(40000, 'x');
  ASSERT_TRUE(producer.Write({{bytes.data(), bytes.size()}}, absl::InfiniteFuture(), Alive).ok());
  EXPECT_EQ(producer.Writable(), kCapacity - 40000);
  ASSERT_TRUE(consumer.Read(bytes.data(), 30000, absl::InfiniteFuture(), Alive).ok());
  EXPECT_EQ(producer.Writable(), kCapacity - 10000);
  ASSERT_TRUE(producer.Write({{bytes.data(), 30000}}, absl::InfiniteFuture(), Alive).ok());  // wraps around
  EXPECT_EQ(producer.Writable(), kCapacity - 40000);
}

// A deferred wake-up (a burst's requests) is owed until WakeDeferred pays
// it; a consumer asleep meanwhile gets every byte once it is paid, and a
// deferred write bigger than the ring still wakes the consumer when it must
// wait for room.
TEST(ShmRingTest, ADeferredWakeUpIsOwedUntilPaid) {
  constexpr size_t kCapacity = 1 << 16;
  Memory m(kCapacity);
  ShmRing producer(m.ptr, kCapacity, true), consumer(m.ptr, kCapacity, false);
  std::vector<char> got(3 * kCapacity), data(3 * kCapacity);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::thread reader([&] {
    ASSERT_TRUE(consumer.WaitReadable(absl::Now() + absl::Seconds(30), Alive).ok());
    ASSERT_TRUE(consumer.Read(got.data(), 100, absl::Now() + absl::Seconds(30), Alive).ok());
    ASSERT_TRUE(consumer.Read(got.data() + 100, got.size() - 100, absl::Now() + absl::Seconds(30), Alive).ok());
  });
  absl::SleepFor(absl::Milliseconds(5));  // (the reader is usually asleep by now; either way is correct)
  ASSERT_TRUE(producer.Write({{data.data(), 100}}, absl::InfiniteFuture(), Alive, /*defer_wake=*/true).ok());
  EXPECT_TRUE(producer.wake_deferred());
  producer.WakeDeferred();
  EXPECT_FALSE(producer.wake_deferred());
  // Three rings' worth, deferred: the full ring wakes the reader itself.
  ASSERT_TRUE(
      producer.Write({{data.data() + 100, data.size() - 100}}, absl::Now() + absl::Seconds(30), Alive, true).ok());
  producer.WakeDeferred();
  reader.join();
  EXPECT_TRUE(got == data);
  // A plain write owes nothing.
  ASSERT_TRUE(producer.Write({{data.data(), 10}}, absl::InfiniteFuture(), Alive).ok());
  EXPECT_FALSE(producer.wake_deferred());
}

// A burst written with deferred wake-ups through a ring much smaller than it:
// the producer wakes the consumer before it waits for room, so neither side
// sits out its wait slice (kSliceMs) — the producer's check, called after a
// wait that ended without room, is not called once per ring-full.
TEST(ShmRingTest, ADeferredBurstLargerThanTheRingDoesNotStall) {
  constexpr size_t kCapacity = 64 << 10, kTotal = 3 << 20;  // ~47 ring-fulls; publications of 4 KiB
  // One publication each, several, or more than the whole ring (never deferred).
  for (const size_t message : {size_t{3} << 10, size_t{10} << 10, size_t{100} << 10}) {
    SCOPED_TRACE(message);
    Memory m(kCapacity);
    ShmRing producer(m.ptr, kCapacity, true), consumer(m.ptr, kCapacity, false);
    const size_t total = kTotal / message * message;
    std::vector<char> data(total), got(total);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13);
    std::thread reader([&] {
      for (size_t at = 0; at < total; at += message) {
        ASSERT_TRUE(consumer.Read(got.data() + at, message, absl::Now() + absl::Seconds(60), Alive).ok());
      }
    });
    int waits_without_room = 0;
    auto count = [&] {
      ++waits_without_room;
      return absl::OkStatus();
    };
    for (size_t at = 0; at < total; at += message) {
      ASSERT_TRUE(producer
                      .Write({{data.data() + at, message}}, absl::Now() + absl::Seconds(60), count,
                             /*defer_wake=*/true)
                      .ok());
    }
    producer.WakeDeferred();
    reader.join();
    EXPECT_TRUE(got == data);
    EXPECT_LT(waits_without_room, 10);  // a stall would sit out a slice at each of ~47 ring-fulls
  }
}

// A side about to wait on its incoming ring first pays what it owes on its
// outgoing one (the peer may sleep on exactly those bytes).
TEST(ShmRingTest, ASideWakesItsPeerBeforeItWaits) {
  constexpr size_t kCapacity = 1 << 16;  // publications of 4 KiB
  Memory out_m(kCapacity), in_m(kCapacity);
  ShmRing out(out_m.ptr, kCapacity, true), in(in_m.ptr, kCapacity, true);
  in.PayBeforeWaiting(&out);
  std::vector<char> bytes(10000, 'r');
  ASSERT_TRUE(out.Write({{bytes.data(), 100}}, absl::InfiniteFuture(), Alive, /*defer_wake=*/true).ok());
  EXPECT_TRUE(out.wake_deferred());
  char c;
  EXPECT_TRUE(absl::IsDeadlineExceeded(in.Read(&c, 1, absl::Now() + absl::Milliseconds(5), Alive)));
  EXPECT_FALSE(out.wake_deferred());
}

}  // namespace
}  // namespace oar::rpc::stream
