// The NCCL backend of Collective: one communicator per process, made by
// ncclCommInitRank from the ncclUniqueId that gen_nccl_id broadcast, with
// one CUDA stream of its own on the process's GPU. A tensor on that GPU
// (CUDAPlace(device)) is reduced in place once its place's stream has
// finished writing it; a host tensor stages through a device buffer kept
// across calls: copy in, the NCCL collective, copy out. A call that does not finish within the
// timeout aborts the communicator (ncclCommAbort) and fails naming the
// operation and the tensor; NCCL does not say which peer failed.
//
// Compiled when CUDA and NCCL are found (OAR_HAVE_NCCL); otherwise Create
// answers Unimplemented. Without a GPU it answers FailedPrecondition.
//
// Thread-safety: used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/collective/collective.h"

namespace oar {

struct NcclOptions {
  const uint8_t* unique_id = nullptr;  // 128 bytes: the ncclUniqueId from trainer 0
  int rank = 0, size = 1;
  int device = 0;  // CUDA device ordinal
  absl::Duration timeout = absl::Seconds(180);
};

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options);

// True when this process can run NCCL: built with it and a GPU is visible.
bool NcclAvailable();

}  // namespace oar
