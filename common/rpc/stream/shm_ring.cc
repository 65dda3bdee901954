#include "common/rpc/stream/shm_ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_common.h"

namespace oar::rpc::stream {

// Each side's words on its own cache line.
struct ShmRing::Control {
  alignas(64) std::atomic<uint64_t> head;       // bytes published by the producer
  alignas(64) std::atomic<uint64_t> tail;       // bytes consumed
  alignas(64) std::atomic<uint32_t> data_word;  // bumped when bytes are published to a waiting consumer
  std::atomic<uint32_t> consumer_waiting;
  alignas(64) std::atomic<uint32_t> space_word;  // bumped when bytes are consumed for a waiting producer
  std::atomic<uint32_t> producer_waiting;
  alignas(64) std::atomic<uint32_t> closed;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");

namespace {

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace

size_t ShmRing::BytesFor(size_t capacity) { return sizeof(Control) + (capacity + 63) / 64 * 64; }

ShmRing::ShmRing(void* memory, size_t capacity, bool init, int spin_us)
    : control_(static_cast<Control*>(memory)),
      data_(static_cast<char*>(memory) + sizeof(Control)),
      capacity_(capacity),
      publish_bytes_(std::clamp<size_t>(capacity / 16, 4096, kMaxPublishBytes)),
      spin_us_(SpinMicros(spin_us)) {
  if (init) new (control_) Control{};
}

void ShmRing::Wake(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiting) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiting->load(std::memory_order_relaxed) != 0) {
    word->fetch_add(1, std::memory_order_release);
    FutexWakeAll(word);
  }
}

absl::Status ShmRing::WaitFor(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiting,
                              const std::function<bool()>& ready, absl::Time deadline, const Check& check,
                              const char* doing) {
  if (pay_first_ != nullptr) pay_first_->WakeDeferred();
  // Spin a little first: the other side is usually mid-copy of the next
  // chunk, and a futex sleep and wake cost more than that.
  const absl::Time spin_until = absl::Now() + absl::Microseconds(spin_us_);
  for (int spin = 0;; ++spin) {
    if (ready()) return absl::OkStatus();
    SpinPause();
    if ((spin & 63) == 63 && absl::Now() >= spin_until) break;
  }
  while (true) {
    if (control_->closed.load(std::memory_order_acquire) != 0) {
      // What the peer published before it closed is still read (a server's
      // refusal, written just before it hangs up).
      return ready() ? absl::OkStatus() : absl::CancelledError("shared-memory ring closed");
    }
    waiting->store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t seen = word->load(std::memory_order_acquire);
    if (ready()) {
      waiting->store(0, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    int ms = kSliceMs;
    if (deadline != absl::InfiniteFuture()) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) {
        waiting->store(0, std::memory_order_relaxed);
        return absl::DeadlineExceededError(absl::StrCat("deadline passed while ", doing));
      }
      ms = static_cast<int>(std::min<int64_t>(ms, left + 1));
    }
    FutexWait(word, seen, ms);
    waiting->store(0, std::memory_order_relaxed);
    if (ready()) return absl::OkStatus();
    absl::Status alive = check();
    if (!alive.ok()) return ready() ? absl::OkStatus() : alive;  // published just before the peer went
  }
}

absl::Status ShmRing::Write(const std::vector<ConstPiece>& pieces, absl::Time deadline, const Check& check,
                            bool defer_wake) {
  if (control_->closed.load(std::memory_order_acquire) != 0) return absl::CancelledError("shared-memory ring closed");
  uint64_t head = control_->head.load(std::memory_order_relaxed);
  uint64_t published = head;
  // Deferred only when the whole message fits in the room there is now: a
  // larger one is read while it is written, as usual.
  size_t bytes = 0;
  for (const ConstPiece& piece : pieces) bytes += piece.size;
  const bool defer = defer_wake && bytes <= Writable();
  for (const ConstPiece& piece : pieces) {
    const char* src = static_cast<const char*>(piece.data);
    size_t left = piece.size;
    while (left > 0) {
      uint64_t tail = control_->tail.load(std::memory_order_acquire);
      if (head - tail == capacity_) {
        // Let the consumer drain what is in: it may sleep on bytes whose
        // wake-up was deferred (by this write or an earlier one).
        if (published != head) {
          control_->head.store(head, std::memory_order_release);
          published = head;
        }
        wake_owed_.store(false, std::memory_order_relaxed);
        Wake(&control_->data_word, &control_->consumer_waiting);
        absl::Status s = WaitFor(
            &control_->space_word, &control_->producer_waiting,
            [&] { return head - control_->tail.load(std::memory_order_acquire) < capacity_; }, deadline, check,
            "sending");
        if (!s.ok()) return s;
        tail = control_->tail.load(std::memory_order_acquire);
      }
      const size_t at = static_cast<size_t>(head % capacity_);
      size_t n = std::min<size_t>({left, capacity_ - static_cast<size_t>(head - tail), capacity_ - at,
                                   publish_bytes_ - static_cast<size_t>(head - published)});
      std::memcpy(data_ + at, src, n);
      src += n;
      left -= n;
      head += n;
      if (head - published >= publish_bytes_) {
        control_->head.store(head, std::memory_order_release);
        published = head;
        if (!defer) Wake(&control_->data_word, &control_->consumer_waiting);
      }
    }
  }
  if (published != head) control_->head.store(head, std::memory_order_release);
  if (defer) {
    wake_owed_.store(true, std::memory_order_release);
  } else {
    wake_owed_.store(false, std::memory_order_relaxed);  // this wake-up covers earlier messages too
    Wake(&control_->data_word, &control_->consumer_waiting);
  }
  // Everything is published: the write is done even if the peer closes the
  // ring now (it may have read the message, answered and hung up already;
  // whether it did is for the reply to tell).
  return absl::OkStatus();
}

absl::Status ShmRing::Read(void* dst, size_t n, absl::Time deadline, const Check& check) {
  char* out = static_cast<char*>(dst);
  uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  while (n > 0) {
    uint64_t head = control_->head.load(std::memory_order_acquire);
    if (head == tail) {
      absl::Status s = WaitFor(
          &control_->data_word, &control_->consumer_waiting,
          [&] { return control_->head.load(std::memory_order_acquire) != tail; }, deadline, check, "receiving");
      if (!s.ok()) return s;
      head = control_->head.load(std::memory_order_acquire);
    }
    const size_t at = static_cast<size_t>(tail % capacity_);
    const size_t k = std::min<size_t>({n, static_cast<size_t>(head - tail), capacity_ - at});
    std::memcpy(out, data_ + at, k);
    out += k;
    n -= k;
    tail += k;
    control_->tail.store(tail, std::memory_order_release);
    Wake(&control_->space_word, &control_->producer_waiting);
  }
  return absl::OkStatus();
}

void ShmRing::WakeDeferred() {
  if (wake_owed_.load(std::memory_order_acquire) && wake_owed_.exchange(false, std::memory_order_acq_rel)) {
    Wake(&control_->data_word, &control_->consumer_waiting);
  }
}

bool ShmRing::Readable() const {
  return control_->head.load(std::memory_order_acquire) != control_->tail.load(std::memory_order_relaxed) ||
         control_->closed.load(std::memory_order_acquire) != 0;
}

size_t ShmRing::Writable() const {
  const uint64_t used = control_->head.load(std::memory_order_relaxed) - control_->tail.load(std::memory_order_acquire);
  return capacity_ - static_cast<size_t>(used);
}

absl::Status ShmRing::WaitReadable(absl::Time deadline, const Check& check) {
  const uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  if (control_->head.load(std::memory_order_acquire) != tail) return absl::OkStatus();
  return WaitFor(
      &control_->data_word, &control_->consumer_waiting,
      [&] { return control_->head.load(std::memory_order_acquire) != tail; }, deadline, check, "waiting for a reply");
}

void ShmRing::Close() {
  control_->closed.store(1, std::memory_order_release);
  control_->data_word.fetch_add(1, std::memory_order_release);
  control_->space_word.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&control_->data_word);
  FutexWakeAll(&control_->space_word);
}

}  // namespace oar::rpc::stream
