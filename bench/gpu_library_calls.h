// gpu_bench's baseline for a training step: the cuBLAS and cuDNN calls a
// program's ops make (mul and its gradient as GEMMs; conv2d, pool2d and
// batch_norm with their gradients as cuDNN calls), at the shapes the program
// declares (the batch for -1), issued straight on the GPU's stream with
// no framework in between: no executor, no kernel lookup, no shape
// inference, no elementwise ops, no feed or fetch.
//
// Thread-safety: a LibraryCalls runs on one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"

namespace oar::bench {

class LibraryCalls {
 public:
  // The calls of block 0 of `program` at `batch` examples on
  // CUDAPlace(device); buffers of the same sizes are allocated here.
  // Global pooling is not handled (the bundled models have none).
  static absl::StatusOr<std::unique_ptr<LibraryCalls>> FromProgram(const ProgramDesc& program, int64_t batch,
                                                                   int device);
  ~LibraryCalls();

  // Issues every call once and waits for the stream.
  void RunAll();
  size_t size() const { return calls_.size(); }
  // "4 GEMMs, 6 convolutions, 4 poolings, 4 batch norms".
  std::string Summary() const;

 private:
  LibraryCalls() = default;
  // Device scratch of `bytes`, owned here.
  void* Buffer(size_t bytes);

  std::vector<std::function<void()>> calls_;
  std::vector<void*> buffers_;
  int gemms_ = 0, convs_ = 0, pools_ = 0, norms_ = 0;
  void* stream_ = nullptr;
};

}  // namespace oar::bench
