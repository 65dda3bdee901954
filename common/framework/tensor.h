// Tensor: a typed, shaped buffer on a Place, with Fluid's level-of-detail (LoD)
// offsets for sequences (a LoDTensor in Fluid's terms). Copying a Tensor shares
// its buffer; CopyFrom makes a deep copy.
//
//   Tensor t;
//   float* p = t.mutable_data<float>(DDim{2, 3});
//   t.data<float>()[0];
//
// Thread-safety: externally synchronized. Tensors that share a buffer see each
// other's writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/device/place.h"
#include "common/framework/data_type.h"
#include "common/framework/ddim.h"

namespace oar {

class BufferPool;  // common/base/buffer_pool.h

// Offsets per level, e.g. {{0, 2, 5}}: two sequences of lengths 2 and 3.
using LoD = std::vector<std::vector<size_t>>;

class Tensor {
 public:
  Tensor() = default;

  const DDim& dims() const { return dims_; }
  // Sets the shape; the buffer is (re)allocated by the next mutable_data.
  // (No write when the shape is the same: Hogwild threads of the
  // AsyncExecutor resize shared parameters to their own shape while others
  // read it.)
  void Resize(const DDim& dims) {
    if (!(dims_ == dims)) dims_ = dims;
  }
  int64_t numel() const { return dims_.numel(); }
  DataType dtype() const { return dtype_; }
  const Place& place() const { return place_; }
  bool initialized() const { return holder_ != nullptr; }

  const LoD& lod() const { return lod_; }
  void set_lod(const LoD& lod) { lod_ = lod; }

  // Returns a buffer of dims().numel() elements of `dtype`, reusing the
  // current one when it is large enough and no other tensor shares it.
  // Contents are unspecified after a reallocation.
  void* mutable_data(DataType dtype, const Place& place = Place{});
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(mutable_data(DataTypeOf<T>::value));
  }
  // On `place` (a GPU kernel's output: mutable_data<float>(ctx.place())).
  template <typename T>
  T* mutable_data(const Place& place) {
    return static_cast<T*>(mutable_data(DataTypeOf<T>::value, place));
  }
  // As mutable_data on the CPU, but a new buffer comes from `pool` and goes
  // back to it, rather than being freed, when the last tensor holding it
  // lets go (common/base/buffer_pool.h).
  void* mutable_data_pooled(DataType dtype, const std::shared_ptr<BufferPool>& pool);
  template <typename T>
  T* mutable_data(const DDim& dims) {
    Resize(dims);
    return mutable_data<T>();
  }

  // The buffer as T; the caller has checked dtype() (debug builds assert).
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  const void* raw_data() const;
  void* raw_data();
  size_t nbytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }

  // Makes this tensor a view of `other`'s buffer, shape, dtype and LoD.
  void ShareDataWith(const Tensor& other) { *this = other; }
  // Deep copy of `other` into a buffer owned by this tensor, on other's place.
  void CopyFrom(const Tensor& other);
  // Deep copy into `dst` (shape, dtype, LoD) on `place`: how tensors move
  // between the host and GPUs (common/device/device_memory.h says when a
  // copy has landed). An error names the places.
  absl::Status CopyTo(const Place& place, Tensor* dst) const;

  // A reference that keeps this tensor's buffer alive (for zero-copy sends:
  // the buffer outlives the tensor while a transfer still reads it).
  std::shared_ptr<const void> KeepAlive() const;
  // True when another tensor (or a KeepAlive reference) shares the buffer;
  // mutable_data then gives this tensor a fresh one.
  bool BufferShared() const { return holder_.use_count() > 1; }
  // What names the buffer for OAR_TSAN_RELEASE (common/base/tsan.h): a reader
  // that shared it through KeepAlive or a copy of this tensor releases it
  // so when it is done, for the writer that later keeps it (mutable_data).
  const void* BufferId() const { return holder_.get(); }

  // Rows [begin, end) of the first dimension, sharing the buffer.
  Tensor Slice(int64_t begin, int64_t end) const;

  // A host tensor of `dims` and `dtype` over memory it does not own: `data`
  // (at least that many bytes), kept alive by `owner` for as long as any
  // tensor holds the buffer. mutable_data writes into it like into any
  // buffer of this tensor's own (when unshared and large enough), and
  // replaces it otherwise; it is never freed by a tensor. (A pserver's
  // parameters in shared memory: common/rpc/stream/shared_region.h.)
  static Tensor OverMemory(void* data, const DDim& dims, DataType dtype, std::shared_ptr<const void> owner);
  // As OverMemory, over memory this process may only read (a parameter a
  // pserver lends read-only). mutable_data never writes into it: it gives
  // this tensor a buffer of its own. Writing through data() is a fault.
  static Tensor OverReadOnlyMemory(const void* data, const DDim& dims, DataType dtype,
                                   std::shared_ptr<const void> owner);
  // Whether this tensor's buffer is memory that OverMemory or
  // OverReadOnlyMemory gave it.
  bool OverForeignMemory() const;
  // False for a buffer over read-only memory; true otherwise (none too).
  bool Writable() const;

  // "float32[2, 3]" plus up to `max_values` leading values.
  std::string ToString(int max_values = 8) const;

 private:
  struct Buffer;
  std::shared_ptr<Buffer> holder_;
  size_t offset_ = 0;  // bytes into holder_
  DDim dims_;
  DataType dtype_ = DataType::kFloat32;
  Place place_;
  LoD lod_;
};

// Fills a tensor from a vector: shape `dims`, values copied.
template <typename T>
Tensor MakeTensor(const DDim& dims, const std::vector<T>& values) {
  Tensor t;
  T* p = t.mutable_data<T>(dims);
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.numel()); ++i) p[i] = values[i];
  return t;
}

// Copies a tensor's values out as a vector of T (T must match dtype()).
template <typename T>
std::vector<T> TensorToVector(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

}  // namespace oar
