// Reader for the IDX format of (Fashion-)MNIST, plain or gzip-compressed:
// a big-endian magic (0x00 0x00 type rank), `rank` big-endian uint32
// dimensions, then the values. Only unsigned-byte data (type 0x08) is read.
//
//   OAR_ASSIGN_OR_RETURN(IdxArray a, ReadIdxFile(".../train-labels-idx1-ubyte.gz"));
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// NotFound when the file cannot be opened; InvalidArgument (naming the file)
// for a bad magic, a truncated body or trailing bytes.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

}  // namespace oar
