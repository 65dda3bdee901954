// WakeDebts: the connections of one StreamClient whose requests went out
// with their peer left asleep (ByteStream::WriteMore): a caller about to
// wait for a reply pays them all first (PayAll), so a trainer's burst of
// sends and barriers to several pservers wakes each pserver's reader once,
// and every reader is awake before the caller sleeps. The client's sweep
// pays them too, which bounds a debt nobody waits on by one sweep.
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace oar::rpc::stream {

class ClientConn;

class WakeDebts {
 public:
  // `conn` wrote a request with its peer left asleep.
  void Owe(std::weak_ptr<ClientConn> conn);
  // Flushes every connection owed so far (those still alive).
  void PayAll();

 private:
  std::atomic<bool> any_{false};  // PayAll's fast path: nothing owed
  absl::Mutex mu_;
  std::vector<std::weak_ptr<ClientConn>> owed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::rpc::stream
