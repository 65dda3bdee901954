// LentSends: the memory a client lends, read-only, to the servers it
// reaches over shared memory on this host, so that a Send's payload goes
// as where it lies instead of as bytes through the ring (wire.h: Hello
// kLendsRegion, a request's kInRegion). A sync trainer's gradients take
// this path: it copies each gradient once, into the variable's own slot
// here, as it would have copied it into the ring, and the pserver reads it
// in place — no copy out of the ring — as a read-only view that keeps the
// mapping alive (Tensor::OverReadOnlyMemory).
//
// A slot belongs to one (connection, trainer, variable) for good, so the
// next Send of the same variable overwrites the same bytes. That is safe
// only where the server is done with a value before the client sends that
// variable again: the caller sends it again only once the call ended
// (OutgoingMessage::lend_payload), and a sync pserver's protocol does the
// rest (ServerOptions::map_lent_sends).
// A variable whose size changes gets a new slot; one that no longer fits
// (--rpc_shm_send_region_bytes) is sent through the ring, as before.
//
//   OAR_ASSIGN_OR_RETURN(auto lent, LentSends::Create(1 << 30));
//   std::optional<Tensor> in_slot = lent->CopyIn("ps0|0|w@GRAD", grad);   // nullopt: no room
//
// Thread-safety: CopyIn is safe for concurrent use on different keys; two
// concurrent CopyIns of one key race on its bytes (the caller's contract
// rules that out).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/tensor.h"
#include "common/rpc/stream/shared_region.h"

namespace oar::rpc::stream {

class LentSends {
 public:
  // `bytes` of address space (pages take memory once written).
  static absl::StatusOr<std::shared_ptr<LentSends>> Create(size_t bytes);

  const SharedRegion& region() const { return *region_; }
  // A tensor over `key`'s slot (allocated on first use, or when `src`'s
  // size changed) holding a copy of `src`, a dense host tensor with its
  // dims and dtype; nullopt when the region has no room left for it.
  std::optional<Tensor> CopyIn(const std::string& key, const Tensor& src);

 private:
  explicit LentSends(std::shared_ptr<SharedRegion> region) : region_(std::move(region)) {}

  const std::shared_ptr<SharedRegion> region_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> slots_ ABSL_GUARDED_BY(mu_);  // offset, bytes
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace oar::rpc::stream
