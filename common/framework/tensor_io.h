// Fluid's binary layout of a LoDTensor, as save/load ops and checkpoints
// write it:
//   uint32 version (0)
//   uint64 lod_level, then per level: uint64 byte size, size_t offsets
//   uint32 tensor version (0), int32 size of a VarType.TensorDesc proto, the
//   proto (data_type, dims), then the raw little-endian data.
// Several tensors back to back form a save_combine file.
//
// Thread-safety: stateless; streams are the caller's.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "common/framework/tensor.h"

namespace oar {

// Appends `t` to `out`. InvalidArgument for an uninitialized tensor.
absl::Status WriteLoDTensor(const Tensor& t, std::ostream& out);
// Reads one tensor; InvalidArgument (naming `what`, e.g. the file) for a
// truncated or malformed record.
absl::Status ReadLoDTensor(std::istream& in, const std::string& what, Tensor* t);

// The tensor part of a record alone (uint32 version 0, int32 size, the
// TensorDesc proto), for writers that stream the data themselves (a
// SparseTable's rows) and their readers; the data follows in the stream.
void WriteTensorHeader(DataType dtype, const DDim& dims, std::ostream& out);
// Errors name `what` and the `record` kind ("LoDTensor", "SelectedRows").
absl::Status ReadTensorHeader(std::istream& in, const std::string& what, const char* record, DataType* dtype,
                              DDim* dims);

// One value's raw little-endian bytes (the records' fixed-size fields).
template <typename T>
void Put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(v));
}
template <typename T>
bool Get(std::istream& in, T* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof(*v)));
}

// Writes `bytes` to `path` atomically: a temporary file in the same
// directory, fsync, rename. A crash leaves either the old file or the new.
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace oar
