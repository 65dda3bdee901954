// JoinTrainers: the communicator of one trainer of a nccl2 job, from what
// gen_nccl_id left in the startup scope (the id trainer 0 made and sent to
// every other trainer over gRPC) and the trainers' endpoints
// (PADDLE_TRAINER_ENDPOINTS): NCCL on GPUs when Oar has it, else the TCP ring
// among the trainers' endpoints, the id (hashed) being the job's token that
// every ring handshake checks — and, when every trainer is on this host,
// shared memory joined over that ring (shm_collective.h;
// --collective_transport=auto|tcp|shm).
//
//   OAR_ASSIGN_OR_RETURN(auto c, JoinTrainers({.id = nccl_id, .rank = 1, .endpoints = eps}));
//
// Thread-safety: stateless; blocks until the ring is formed (bounded by the
// timeout).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/collective/collective.h"

namespace oar {

struct JoinOptions {
  const Tensor* id = nullptr;          // NCCLID: 128 bytes
  int rank = 0;                        // PADDLE_TRAINER_ID
  std::vector<std::string> endpoints;  // every trainer's, in id order
  bool gpu = false;                    // the trainer trains on CUDA places: NCCL
  int device = 0;
  std::string transport;                          // CPUs: auto | tcp | shm; empty: auto
  absl::Duration timeout = absl::ZeroDuration();  // 0: RpcOptions' default deadline
};

absl::StatusOr<std::unique_ptr<Collective>> JoinTrainers(const JoinOptions& options);

// The 32-byte ring token of a 128-byte id.
std::string RingToken(const Tensor& id);

}  // namespace oar
