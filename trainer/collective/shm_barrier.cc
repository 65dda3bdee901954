#include "trainer/collective/shm_barrier.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar {

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the control block's atomics are shared between processes: they must be lock-free");

struct alignas(64) ShmBarrier::RankState {
  std::atomic<uint64_t> arrived;  // barriers entered
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> gone;  // 1 once its communicator was destroyed
};

struct ShmBarrier::Control {
  uint64_t magic;
  uint64_t nonce;
  uint32_t size;
  alignas(64) std::atomic<uint32_t> wake;     // the futex word: bumped by every arrival
  alignas(64) std::atomic<uint32_t> waiters;  // ranks asleep on it
  alignas(64) std::atomic<uint32_t> claim;    // 0, or 1 + the rank that breaks it (first come)
  std::atomic<uint32_t> broken;               // `claim`, once the claimant has written `why`
  std::atomic<uint64_t> late;                 // bit r: a wait timed out on rank r (r < 64)
  char why[236];
};

namespace {

constexpr uint64_t kMagic = 0x324c4c4f43524141ULL;             // "AARCOLL2"
constexpr int kSpins = 200;                                    // checks before sleeping (about 10 microseconds)
constexpr absl::Duration kNap = absl::Milliseconds(20);        // longest sleep between checks of the deadline
constexpr absl::Duration kPidEvery = absl::Milliseconds(100);  // how often missing ranks' processes are looked up

void FutexWake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, absl::Duration d) {
  const timespec ts = absl::ToTimespec(d);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// True when process `pid` is no more: gone, or a zombie its parent has not
// reaped yet.
bool ProcessGone(int32_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) == 0 || errno == EPERM) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
  }
  return errno == ESRCH;
}

}  // namespace

size_t ShmBarrier::Bytes(int n) { return sizeof(Control) + sizeof(RankState) * static_cast<size_t>(n); }

void ShmBarrier::Init(char* at, int n, uint64_t nonce) {
  auto* c = new (at) Control{};
  c->magic = kMagic;
  c->nonce = nonce;
  c->size = static_cast<uint32_t>(n);
  auto* states = reinterpret_cast<RankState*>(at + sizeof(Control));
  for (int r = 0; r < n; ++r) new (&states[r]) RankState{};
}

absl::Status ShmBarrier::Check(const char* at, int n, uint64_t nonce) {
  const auto* c = reinterpret_cast<const Control*>(at);
  if (c->magic != kMagic || c->nonce != nonce || c->size != static_cast<uint32_t>(n)) {
    return absl::FailedPreconditionError("the shared segment is not this job's");
  }
  return absl::OkStatus();
}

ShmBarrier::ShmBarrier(char* at, ShmRankOptions options) : c_(reinterpret_cast<Control*>(at)), o_(std::move(options)) {
  State(o_.rank).pid.store(static_cast<int32_t>(::getpid()));
}

ShmBarrier::~ShmBarrier() {
  State(o_.rank).gone.store(1);
  c_->wake.fetch_add(1);
  FutexWake(&c_->wake);
}

ShmBarrier::RankState& ShmBarrier::State(int rank) const {
  return reinterpret_cast<RankState*>(reinterpret_cast<char*>(c_) + sizeof(Control))[rank];
}

std::vector<int> ShmBarrier::Late() const {
  const uint64_t late = c_->late.load();
  std::vector<int> out;
  for (int r = 0; r < std::min(size(), 64); ++r) {
    if ((late >> r) & 1) out.push_back(r);
  }
  return out;
}

std::string ShmBarrier::Peer(int rank) const {
  return absl::StrCat("rank ", rank, " (", o_.endpoints[static_cast<size_t>(rank)], ")");
}

bool ShmBarrier::AllArrived(uint64_t phase) const {
  for (int r = 0; r < size(); ++r) {
    if (State(r).arrived.load() < phase) return false;
  }
  return true;
}

int ShmBarrier::GoneMissing(uint64_t phase, bool look_up_processes, std::string* how) const {
  for (int r = 0; r < size(); ++r) {
    const RankState& s = State(r);
    if (r == o_.rank || s.arrived.load() >= phase) continue;
    if (s.gone.load() != 0) {
      *how = "left the job (its communicator was closed)";
      return r;
    }
    if (look_up_processes && ProcessGone(s.pid.load())) {
      *how = absl::StrCat("exited (process ", s.pid.load(), " is gone)");
      return r;
    }
  }
  return -1;
}

void ShmBarrier::Break(const absl::Status& why) {
  uint32_t none = 0;
  const uint32_t me = static_cast<uint32_t>(o_.rank) + 1;
  if (c_->claim.compare_exchange_strong(none, me)) {
    // The reason first, then the mark: whoever sees the mark reads it whole.
    const std::string text(why.message());
    const size_t n = std::min(text.size(), sizeof(c_->why) - 1);
    std::memcpy(c_->why, text.data(), n);
    c_->why[n] = '\0';
    c_->broken.store(me);
  }
  c_->wake.fetch_add(1);
  FutexWake(&c_->wake);
}

absl::Status ShmBarrier::Broken() const {
  const uint32_t b = c_->broken.load();
  if (b == 0) return absl::OkStatus();
  const int who = static_cast<int>(b) - 1;
  const std::string why(c_->why, strnlen(c_->why, sizeof(c_->why)));
  if (who == o_.rank) return absl::FailedPreconditionError(absl::StrCat("the communicator broke earlier: ", why));
  return absl::FailedPreconditionError(
      absl::StrCat(who >= 0 && who < size() ? Peer(who) : absl::StrCat("rank ", who), " failed: ", why));
}

absl::Status ShmBarrier::BreakWith(const absl::Status& s, const char* what, const std::string& name) {
  // The others read the operation and who saw it in the reason.
  Break(absl::Status(s.code(), absl::StrCat(what, " '", name, "' on rank ", o_.rank, ": ", s.message())));
  return s;
}

absl::Status ShmBarrier::Wait(const char* what, const std::string& name) {
  if (absl::Status b = Broken(); !b.ok()) return b;
  const uint64_t phase = ++phase_;
  State(o_.rank).arrived.store(phase);
  c_->wake.fetch_add(1);
  if (c_->waiters.load() > 0) FutexWake(&c_->wake);
  const absl::Time deadline = absl::Now() + o_.timeout;
  absl::Time look_up = absl::Now() + kNap;  // the first lookup of missing processes; then every kPidEvery
  for (int spin = 0;; ++spin) {
    const uint32_t seen = c_->wake.load();
    if (AllArrived(phase)) return absl::OkStatus();
    if (absl::Status b = Broken(); !b.ok()) return b;
    if (spin < kSpins) {
      Pause();
      continue;
    }
    const absl::Time now = absl::Now();
    const bool look = now >= look_up;
    if (look) look_up = now + kPidEvery;
    std::string how;
    if (const int gone = GoneMissing(phase, look, &how); gone >= 0) {
      return BreakWith(absl::UnavailableError(absl::StrCat(Peer(gone), " ", how)), what, name);
    }
    if (now >= deadline) {
      std::vector<std::string> missing;
      uint64_t late = 0;
      for (int r = 0; r < size(); ++r) {
        if (State(r).arrived.load() >= phase) continue;
        missing.push_back(Peer(r));
        if (r < 64) late |= uint64_t{1} << r;
      }
      if (missing.empty()) return absl::OkStatus();  // the last one came just now: the others go on, so do we
      c_->late.fetch_or(late);                       // before the break: whoever sees it broken reads them
      return BreakWith(absl::DeadlineExceededError(absl::StrCat(absl::StrJoin(missing, ", "), " did not arrive within ",
                                                                absl::FormatDuration(o_.timeout))),
                       what, name);
    }
    // Asleep only after saying so: an arrival after `seen` either finds the
    // count raised (and wakes us) or changed the word (so we do not sleep).
    c_->waiters.fetch_add(1);
    if (!AllArrived(phase) && c_->broken.load() == 0) FutexWait(&c_->wake, seen, std::min(kNap, deadline - now));
    c_->waiters.fetch_sub(1);
  }
}

}  // namespace oar
