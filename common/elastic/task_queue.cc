#include "common/elastic/task_queue.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace oar::elastic {

TaskQueue::TaskQueue(EtcdClient* etcd, std::string job, std::string member, int64_t lease)
    : etcd_(etcd), job_(std::move(job)), member_(std::move(member)), lease_(lease) {}

std::string TaskQueue::Key(int64_t epoch, const std::string& rest) const {
  return absl::StrCat("/oar/", job_, "/tasks/", epoch, "/", rest);
}

absl::Status TaskQueue::Open(int64_t epoch, int64_t chunks) {
  if (chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("epoch ", epoch, " of job '", job_, "' has no data to hand out"));
  }
  OAR_ASSIGN_OR_RETURN(bool created, etcd_->Create(Key(epoch, "chunks"), absl::StrCat(chunks, " ", member_)));
  if (created) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(EtcdRange held, etcd_->Get(Key(epoch, "chunks")));
  const std::string said = held.kvs.empty() ? "" : held.kvs[0].value;
  int64_t theirs = 0;
  const size_t space = said.find(' ');
  if (!absl::SimpleAtoi(said.substr(0, space), &theirs) || theirs != chunks) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_, "', epoch ", epoch, ": ", member_, " cuts the data into ", chunks, " chunks, but ",
                     space == std::string::npos ? "another member" : said.substr(space + 1), " cut it into '",
                     said.substr(0, space), "' (every trainer must read the same data with the same settings)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EpochProgress> TaskQueue::Progress(int64_t epoch) {
  OAR_ASSIGN_OR_RETURN(EtcdRange range, etcd_->GetPrefix(Key(epoch, "")));
  EpochProgress p;
  const std::string base = Key(epoch, "");
  for (const EtcdKv& kv : range.kvs) {
    const std::string rest = kv.key.substr(base.size());
    int64_t chunk = 0;
    if (rest == "chunks") {
      (void)absl::SimpleAtoi(kv.value.substr(0, kv.value.find(' ')), &p.chunks);
    } else if (rest.rfind("done/", 0) == 0 && absl::SimpleAtoi(rest.substr(5), &chunk)) {
      p.done[chunk] = kv.value;
    } else if (rest.rfind("claim/", 0) == 0 && absl::SimpleAtoi(rest.substr(6), &chunk)) {
      p.claimed[chunk] = kv.value;
    }
  }
  if (p.chunks == 0) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_, "': epoch ", epoch, " was not opened"));
  }
  return p;
}

absl::StatusOr<std::optional<int64_t>> TaskQueue::Take(int64_t epoch) {
  OAR_ASSIGN_OR_RETURN(EpochProgress p, Progress(epoch));
  for (int64_t c = 0; c < p.chunks; ++c) {
    if (p.done.count(c) != 0 || p.claimed.count(c) != 0) continue;
    // Another member may take it between the read and here, or finish it
    // (its claim just went): then the next.
    const std::string taken = Key(epoch, absl::StrCat("taken/", c));
    OAR_ASSIGN_OR_RETURN(std::optional<std::string> before,
                         etcd_->CreateUnless(Key(epoch, absl::StrCat("claim/", c)),
                                             Key(epoch, absl::StrCat("done/", c)), member_, lease_.load(), taken));
    if (!before.has_value()) continue;
    if (!before->empty()) {
      LOG(WARNING) << "job '" << job_ << "', epoch " << epoch << ": " << member_ << " takes chunk " << c
                   << " again, after " << *before << " left it unfinished";
      requeued_.fetch_add(1);
    }
    return std::optional<int64_t>(c);
  }
  return std::optional<int64_t>();
}

absl::StatusOr<std::optional<int64_t>> TaskQueue::Next(int64_t epoch, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    OAR_ASSIGN_OR_RETURN(std::optional<int64_t> c, Take(epoch));
    if (c.has_value()) return c;
    OAR_ASSIGN_OR_RETURN(EpochProgress p, Progress(epoch));
    if (p.finished()) return std::optional<int64_t>();
    if (absl::Now() >= until) {
      std::vector<std::string> busy;
      for (const auto& [chunk, who] : p.claimed) busy.push_back(absl::StrCat(who, " (chunk ", chunk, ")"));
      return absl::DeadlineExceededError(absl::StrCat("job '", job_, "', epoch ", epoch, ": ", member_,
                                                      " found no chunk to train for ", absl::FormatDuration(timeout),
                                                      "; still training: ", absl::StrJoin(busy, ", ")));
    }
    absl::SleepFor(std::min(absl::Milliseconds(200), until - absl::Now()));
  }
}

absl::Status TaskQueue::Done(int64_t epoch, int64_t chunk) {
  const std::string claim = Key(epoch, absl::StrCat("claim/", chunk));
  OAR_ASSIGN_OR_RETURN(bool moved, etcd_->MoveIf(claim, member_, Key(epoch, absl::StrCat("done/", chunk)), member_));
  if (moved) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("job '", job_, "', epoch ", epoch, ": chunk ", chunk,
                                                    " is no longer ", member_,
                                                    "'s (its lease expired and the chunk was handed out again)"));
}

}  // namespace oar::elastic
