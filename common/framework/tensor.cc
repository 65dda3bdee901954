#include "common/framework/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/buffer_pool.h"
#include "common/base/status.h"
#include "common/base/tsan.h"
#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "glog/logging.h"

namespace oar {

namespace {
constexpr size_t kAlignment = 64;

// Bytes for a `dims`-shaped buffer of `dtype`. A negative dimension or a
// size that overflows is a bug in the caller (ops check shapes first:
// PreparedBlock rejects negative inferred shapes), and writing through a
// wrapped-around size would corrupt the heap, so both stop the process.
size_t CheckedBytes(const DDim& dims, DataType dtype) {
  uint64_t bytes = SizeOf(dtype);
  for (int64_t d : dims) {
    if (d < 0) LOG(FATAL) << "Tensor::mutable_data: shape " << dims.ToString() << " has a negative dimension";
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      LOG(FATAL) << "Tensor::mutable_data: the byte size of shape " << dims.ToString() << " overflows";
    }
  }
  if (bytes > std::numeric_limits<size_t>::max() / 2) {
    LOG(FATAL) << "Tensor::mutable_data: the byte size of shape " << dims.ToString() << " overflows";
  }
  return static_cast<size_t>(bytes);
}
}  // namespace

struct Tensor::Buffer {
  Buffer(const Place& where, size_t n) : size(n), place(where) {
    if (!place.is_cpu()) {
      ptr = AllocOn(place, n);
      return;
    }
    size_t rounded = (n + kAlignment - 1) / kAlignment * kAlignment;
    ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (ptr == nullptr) LOG(FATAL) << "Tensor: cannot allocate " << n << " bytes";
  }
  // From `p`, and back to it when the last tensor holding it lets go.
  Buffer(std::shared_ptr<BufferPool> p, size_t n) : pool(std::move(p)) {
    const BufferPool::Block b = pool->Take(n);
    ptr = b.ptr;
    size = b.bytes;
  }
  // Over `p`, which `keep` keeps alive; never freed here.
  Buffer(void* p, size_t n, std::shared_ptr<const void> keep, bool can_write)
      : ptr(p), size(n), owner(std::move(keep)), writable(can_write) {}
  ~Buffer() {
    if (owner != nullptr) {
      // not ours: `owner` lets go of it
    } else if (pool != nullptr) {
      pool->Give({ptr, size});
    } else if (!place.is_cpu()) {
      FreeOn(place, ptr);
    } else {
      std::free(ptr);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* ptr;
  size_t size;
  Place place;
  std::shared_ptr<BufferPool> pool;
  std::shared_ptr<const void> owner;  // OverMemory's
  bool writable = true;               // false: OverReadOnlyMemory's
};

void* Tensor::mutable_data(DataType dtype, const Place& place) {
  const size_t need = CheckedBytes(dims_, dtype);
  // Written only when they change: Hogwild threads (AsyncExecutor) take the
  // output buffer of a shared parameter while others read its type.
  if (dtype_ != dtype) dtype_ = dtype;
  if (!(place_ == place)) place_ = place;
  // Never write into a buffer another tensor still shares (a view, a fed
  // tensor), nor into read-only memory: give this one its own.
  if (holder_ == nullptr || holder_->size < need + offset_ || holder_.use_count() > 1 || !(holder_->place == place) ||
      !holder_->writable) {
    holder_ = std::make_shared<Buffer>(place, need);
    offset_ = 0;
  } else {
    // The last other owner may have let go on another thread just now (an
    // RPC reply sent, a fetched value dropped): its reads of the buffer
    // happen before the writes that follow (its release of the count, this
    // load of it, then this fence).
    std::atomic_thread_fence(std::memory_order_acquire);
    OAR_TSAN_ACQUIRE(holder_.get());
  }
  return static_cast<char*>(holder_->ptr) + offset_;
}

void* Tensor::mutable_data_pooled(DataType dtype, const std::shared_ptr<BufferPool>& pool) {
  const size_t need = CheckedBytes(dims_, dtype);
  if (holder_ == nullptr || holder_->size < need + offset_ || holder_.use_count() > 1 || !holder_->place.is_cpu() ||
      !holder_->writable) {
    if (dtype_ != dtype) dtype_ = dtype;
    if (!(place_ == Place{})) place_ = Place{};
    holder_ = std::make_shared<Buffer>(pool, need);
    offset_ = 0;
    return holder_->ptr;
  }
  return mutable_data(dtype);  // its own buffer fits: kept, as mutable_data does
}

const void* Tensor::raw_data() const { return holder_ ? static_cast<const char*>(holder_->ptr) + offset_ : nullptr; }

void* Tensor::raw_data() { return holder_ ? static_cast<char*>(holder_->ptr) + offset_ : nullptr; }

std::shared_ptr<const void> Tensor::KeepAlive() const { return holder_; }

void Tensor::CopyFrom(const Tensor& other) {
  if (this == &other) return;
  if (holder_ != nullptr && holder_ == other.holder_) holder_.reset();
  dims_ = other.dims_;
  lod_ = other.lod_;
  void* dst = mutable_data(other.dtype_, other.place_);
  if (!other.initialized()) return;
  if (other.place_.is_cpu()) {
    std::memcpy(dst, other.raw_data(), other.nbytes());
    return;
  }
  const absl::Status s = CopyBytes(place_, dst, other.place_, other.raw_data(), other.nbytes());
  CHECK(s.ok()) << "Tensor::CopyFrom: " << s;
}

absl::Status Tensor::CopyTo(const Place& place, Tensor* dst) const {
  if (dst == this) return absl::InvalidArgumentError("Tensor::CopyTo: the destination is the source");
  if (place.is_gpu()) OAR_RETURN_IF_ERROR(RequireGpu(place.device));
  if (place_.is_gpu() && initialized()) OAR_RETURN_IF_ERROR(RequireGpu(place_.device));
  if (dst->holder_ != nullptr && dst->holder_ == holder_) dst->holder_.reset();
  dst->dims_ = dims_;
  dst->lod_ = lod_;
  if (!initialized()) {
    dst->holder_.reset();
    dst->dtype_ = dtype_;
    return absl::OkStatus();
  }
  void* p = dst->mutable_data(dtype_, place);
  return CopyBytes(place, p, place_, raw_data(), nbytes());
}

Tensor Tensor::OverMemory(void* data, const DDim& dims, DataType dtype, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dims_ = dims;
  t.dtype_ = dtype;
  t.holder_ = std::make_shared<Buffer>(data, CheckedBytes(dims, dtype), std::move(owner), /*can_write=*/true);
  return t;
}

Tensor Tensor::OverReadOnlyMemory(const void* data, const DDim& dims, DataType dtype,
                                  std::shared_ptr<const void> owner) {
  Tensor t;
  t.dims_ = dims;
  t.dtype_ = dtype;
  // The pointer loses const here only to sit in Buffer; `writable` keeps
  // mutable_data from ever handing it out for writing.
  t.holder_ = std::make_shared<Buffer>(const_cast<void*>(data), CheckedBytes(dims, dtype), std::move(owner),
                                       /*can_write=*/false);
  return t;
}

bool Tensor::OverForeignMemory() const { return holder_ != nullptr && holder_->owner != nullptr; }

bool Tensor::Writable() const { return holder_ == nullptr || holder_->writable; }

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  Tensor out = *this;
  out.lod_.clear();
  if (dims_.size() == 0) return out;
  int64_t row = dims_.Product(1, dims_.size()) * SizeOf(dtype_);
  out.offset_ = offset_ + static_cast<size_t>(begin * row);
  out.dims_[0] = end - begin;
  return out;
}

std::string Tensor::ToString(int max_values) const {
  std::string s = absl::StrCat(DataTypeName(dtype_), dims_.ToString());
  if (!initialized()) return absl::StrCat(s, " (uninitialized)");
  if (!place_.is_host()) {  // shown from a host copy
    Tensor host;
    const absl::Status copied = Slice(0, dims_.size() == 0 ? 0 : dims_[0]).CopyTo(CPUPlace(), &host);
    if (!copied.ok()) return absl::StrCat(s, " on ", place_.ToString(), " (unreadable: ", copied.message(), ")");
    return absl::StrCat(host.ToString(max_values), " on ", place_.ToString());
  }
  int64_t n = std::min<int64_t>(numel(), max_values);
  absl::StrAppend(&s, " {");
  for (int64_t i = 0; i < n; ++i) {
    if (i) absl::StrAppend(&s, ", ");
    switch (dtype_) {
      case DataType::kFloat32:
        absl::StrAppend(&s, data<float>()[i]);
        break;
      case DataType::kFloat64:
        absl::StrAppend(&s, data<double>()[i]);
        break;
      case DataType::kInt32:
        absl::StrAppend(&s, data<int32_t>()[i]);
        break;
      case DataType::kInt64:
        absl::StrAppend(&s, data<int64_t>()[i]);
        break;
      case DataType::kBool:
        absl::StrAppend(&s, data<bool>()[i] ? "true" : "false");
        break;
      default:
        absl::StrAppend(&s, "?");
    }
  }
  if (numel() > n) absl::StrAppend(&s, ", ...");
  absl::StrAppend(&s, "}");
  return s;
}

}  // namespace oar
