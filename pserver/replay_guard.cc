#include "pserver/replay_guard.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_client.h"
#include "glog/logging.h"

namespace oar {
namespace {

constexpr uint64_t kCounterMask = (uint64_t{1} << rpc::kSeqCounterBits) - 1;

}  // namespace

ReplayGuard::ReplayGuard(int fanin, size_t window) : window_(std::max<size_t>(window, 1)) {
  absl::MutexLock l(&mu_);
  tables_.resize(static_cast<size_t>(std::max(fanin, 1)));
}

ReplayGuard::Table* ReplayGuard::TableFor(int trainer, uint64_t seq) {
  Table& t = tables_.at(static_cast<size_t>(trainer));
  const uint64_t incarnation = seq & ~kCounterMask;
  switch (t.run.Observe(incarnation)) {
    case TrainerRun::Seen::kLatest:
      return &t;
    case TrainerRun::Seen::kReplaced:
      return nullptr;
    case TrainerRun::Seen::kNew:
      break;
  }
  if (t.run.restarted())
    LOG(INFO) << "trainer " << trainer << " restarted (a new sequence); its old calls are forgotten";
  TrainerRun run = t.run;
  t = Table{};
  t.run = run;
  return &t;
}

bool ReplayGuard::FromTheLatestRun(int trainer, uint64_t seq) const {
  absl::MutexLock l(&mu_);
  return tables_.at(static_cast<size_t>(trainer)).run.LatestOrFirst(seq & ~kCounterMask);
}

std::optional<ReplayGuard::Ticket> ReplayGuard::TryBegin(int trainer, uint64_t seq) {
  if (seq == 0) return Ticket{};
  absl::MutexLock l(&mu_);
  Table* table = TableFor(trainer, seq);
  if (table == nullptr) return Ticket{};  // an earlier run's late call: the handler refuses it
  Table& t = *table;
  const uint64_t counter = seq & kCounterMask;
  if (counter <= t.evicted_up_to && !t.entries.count(counter)) {
    ++duplicates_;
    return Ticket{.duplicate = true, .first_answer = absl::OkStatus()};
  }
  auto [it, fresh] = t.entries.try_emplace(counter);
  if (fresh) return Ticket{};
  if (it->second.done && it->second.rerun) {  // the first attempt asked for this retry
    it->second = Entry{};
    --t.done;
    return Ticket{};
  }
  if (!it->second.done) return std::nullopt;
  ++duplicates_;
  return Ticket{.duplicate = true, .first_answer = it->second.answer};
}

absl::StatusOr<ReplayGuard::Ticket> ReplayGuard::Begin(int trainer, uint64_t seq, absl::Time deadline) {
  if (seq == 0) return Ticket{};
  absl::MutexLock l(&mu_);
  Table* table = TableFor(trainer, seq);
  if (table == nullptr) return Ticket{};  // an earlier run's late call: the handler refuses it
  Table& t = *table;
  const uint64_t incarnation = seq & ~kCounterMask, counter = seq & kCounterMask;
  if (counter <= t.evicted_up_to && !t.entries.count(counter)) {
    ++duplicates_;
    return Ticket{.duplicate = true, .first_answer = absl::OkStatus()};
  }
  auto [it, fresh] = t.entries.try_emplace(counter);
  if (fresh) return Ticket{};
  if (it->second.done && it->second.rerun) {  // the first attempt asked for this retry
    it->second = Entry{};
    --t.done;
    return Ticket{};
  }
  ++duplicates_;
  // Looked up afresh on each check: a new incarnation may replace the table.
  struct First {
    ReplayGuard* g;
    size_t trainer;
    uint64_t incarnation, counter;
    const Entry* Find() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const Table& t = g->tables_[trainer];
      if (t.run.latest() != incarnation) return nullptr;
      auto it = t.entries.find(counter);
      return it == t.entries.end() ? nullptr : &it->second;
    }
  } first{this, static_cast<size_t>(trainer), incarnation, counter};
  const bool finished = mu_.AwaitWithDeadline(absl::Condition(
                                                  +[](First* f) {
                                                    const Entry* e = f->Find();
                                                    return e == nullptr || e->done;
                                                  },
                                                  &first),
                                              deadline);
  const Entry* e = first.Find();
  if (e == nullptr) {
    if (tables_[static_cast<size_t>(trainer)].run.latest() != incarnation) {
      return absl::AbortedError(absl::StrCat("trainer ", trainer, " restarted while a retry of its call waited"));
    }
    return Ticket{.duplicate = true, .first_answer = absl::OkStatus()};  // finished and already forgotten
  }
  if (!finished) {
    return absl::DeadlineExceededError(absl::StrCat("a retry of call ", counter, " from trainer ", trainer,
                                                    " waited for the first attempt, still running"));
  }
  return Ticket{.duplicate = true, .first_answer = e->answer};
}

void ReplayGuard::End(int trainer, uint64_t seq, const absl::Status& answer) {
  if (seq == 0) return;
  absl::MutexLock l(&mu_);
  Table& t = tables_.at(static_cast<size_t>(trainer));
  if ((seq & ~kCounterMask) != t.run.latest()) return;  // a newer incarnation took over meanwhile
  auto it = t.entries.find(seq & kCounterMask);
  if (it == t.entries.end() || it->second.done) return;
  it->second.done = true;
  it->second.answer = answer;
  it->second.rerun = absl::IsUnavailable(answer);
  ++t.done;
  // Forget the oldest finished numbers beyond the window.
  while (t.done > window_) {
    auto oldest = t.entries.begin();
    if (!oldest->second.done) break;  // wait until it finishes
    t.evicted_up_to = std::max(t.evicted_up_to, oldest->first);
    t.entries.erase(oldest);
    --t.done;
  }
}

int64_t ReplayGuard::duplicates() const {
  absl::MutexLock l(&mu_);
  return duplicates_;
}

}  // namespace oar
