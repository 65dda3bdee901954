// TaskQueue: an epoch's data cut into chunks (files, or record ranges of a
// source; the caller maps a chunk's index to its data) and handed out to
// an elastic job's trainers through etcd, so each chunk is trained once per
// epoch whoever comes and goes. Keys under /oar/<job>/tasks/<epoch>/:
//   chunks      how many (the first member to open the epoch sets it)
//   claim/<c>   the member training chunk c, under that member's lease: it
//               goes when the member dies or is cut off, and c is handed out
//               again (to whoever asks next)
//   done/<c>    the member that trained c, written with the claim's removal
//               in one transaction, and only while the claim is still its own
//   taken/<c>   the last member that claimed c: a claim that finds it there
//               takes a chunk handed out again (requeued())
// A claim is one transaction: claim/<c> is created, and taken/<c> written,
// only while neither claim/<c> nor done/<c> exists.
//
//   TaskQueue q(etcd, "job1", "trainer/2", lease);
//   OAR_RETURN_IF_ERROR(q.Open(epoch, files.size()));
//   while (true) {
//     OAR_ASSIGN_OR_RETURN(std::optional<int64_t> c, q.Next(epoch, deadline));
//     if (!c) break;                       // every chunk is done
//     ... train on chunk *c ...
//     OAR_RETURN_IF_ERROR(q.Done(epoch, *c));
//   }
//
// Thread-safety: every method may be called from any thread; each is a few
// etcd calls, atomic where it claims or completes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/elastic/etcd_client.h"

namespace oar::elastic {

struct EpochProgress {
  int64_t chunks = 0;
  std::map<int64_t, std::string> done;     // chunk -> the member that trained it
  std::map<int64_t, std::string> claimed;  // chunk -> the member training it
  bool finished() const { return chunks > 0 && static_cast<int64_t>(done.size()) == chunks; }
};

class TaskQueue {
 public:
  // `lease`: the member's (Membership's); its claims go with it.
  TaskQueue(EtcdClient* etcd, std::string job, std::string member, int64_t lease);

  // Declares `epoch` to have `chunks` chunks; a member that says another
  // count than the first is refused (FailedPrecondition naming both).
  absl::Status Open(int64_t epoch, int64_t chunks);
  // Claims the lowest chunk nobody trained or is training: nullopt when
  // there is none now (every chunk is done, or claimed by a live member).
  absl::StatusOr<std::optional<int64_t>> Take(int64_t epoch);
  // Take, waiting while every remaining chunk is claimed by others (one of
  // them may die and its chunk come back): nullopt once all are done;
  // DeadlineExceeded after `timeout`, naming the members still training.
  absl::StatusOr<std::optional<int64_t>> Next(int64_t epoch, absl::Duration timeout);
  // Chunk `c` trained: FailedPrecondition if this member's claim on it is
  // gone (its lease expired: the chunk is another's now, and this member's
  // work on it must not count).
  absl::Status Done(int64_t epoch, int64_t chunk);
  absl::StatusOr<EpochProgress> Progress(int64_t epoch);

  // Chunks this member took that another had claimed before (and lost
  // with its lease).
  int64_t requeued() const { return requeued_.load(); }
  // A new lease (Membership registered again): later claims use it.
  void set_lease(int64_t lease) { lease_ = lease; }

 private:
  std::string Key(int64_t epoch, const std::string& rest) const;

  EtcdClient* etcd_;
  const std::string job_, member_;
  std::atomic<int64_t> lease_;
  std::atomic<int64_t> requeued_{0};
};

}  // namespace oar::elastic
