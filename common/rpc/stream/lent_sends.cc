#include "common/rpc/stream/lent_sends.h"

#include <cstring>

#include "glog/logging.h"

namespace oar::rpc::stream {

absl::StatusOr<std::shared_ptr<LentSends>> LentSends::Create(size_t bytes) {
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(bytes, "oar-lent-sends");
  if (!region.ok()) return region.status();
  return std::shared_ptr<LentSends>(new LentSends(*std::move(region)));
}

std::optional<Tensor> LentSends::CopyIn(const std::string& key, const Tensor& src) {
  if (!src.initialized() || !src.place().is_cpu() || src.nbytes() == 0) return std::nullopt;
  const uint64_t bytes = src.nbytes();
  uint64_t offset = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = slots_.find(key);
    if (it == slots_.end() || it->second.second != bytes) {
      constexpr uint64_t kAlign = 64;
      const uint64_t size = (bytes + kAlign - 1) / kAlign * kAlign;
      if (size > region_->size() - used_) {
        if (!warned_) {
          LOG(WARNING) << "the " << region_->size() << "-byte region lent for sends is full: '" << key
                       << "' and any later new variable go through the ring (--rpc_shm_send_region_bytes)";
          warned_ = true;
        }
        return std::nullopt;
      }
      it = slots_.insert_or_assign(key, std::make_pair(used_, bytes)).first;
      used_ += size;
    }
    offset = it->second.first;
  }
  char* slot = region_->WritableAt(offset, bytes);
  std::memcpy(slot, src.raw_data(), bytes);
  Tensor t = Tensor::OverMemory(slot, src.dims(), src.dtype(), region_);
  t.set_lod(src.lod());
  return t;
}

}  // namespace oar::rpc::stream
