// Which role this process plays in a job and where the others are, read as
// Fluid's launch scripts and Kubernetes operators set them:
//   PADDLE_TRAINING_ROLE (or TRAINING_ROLE)       TRAINER | PSERVER
//   PADDLE_TRAINER_ID                             0 <= id < trainers (trainers)
//   PADDLE_TRAINERS_NUM                           number of trainers
//   PADDLE_PSERVER_ENDPOINTS (or PADDLE_PSERVERS_IP_PORT_LIST)  ip:port,...
//   PADDLE_CURRENT_ENDPOINT (or POD_IP + PADDLE_PORT)  this process (pservers)
//   PADDLE_TRAINER_ENDPOINTS                      ip:port,... (nccl2 mode)
// Flags (--role, --trainer_id, ...) override the variables. A missing or
// contradictory value is an error that names the variable.
//
// Thread-safety: stateless (the environment is read through `getenv`).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

struct RoleEnv {
  enum class Role { kTrainer, kPserver };
  Role role = Role::kTrainer;
  int trainer_id = 0;
  int trainers = 1;
  std::vector<std::string> pservers;
  std::string current_endpoint;
  std::vector<std::string> trainer_endpoints;  // nccl2 mode; in pserver mode where given (global shuffle)
  std::string RoleName() const { return role == Role::kTrainer ? "TRAINER" : "PSERVER"; }
};

struct RoleOverrides {
  std::optional<std::string> role, pservers, current_endpoint, trainer_endpoints;
  std::optional<int> trainer_id, trainers;
};

using GetEnv = std::function<const char*(const char*)>;

// `nccl2`: trainers need PADDLE_TRAINER_ENDPOINTS and their own endpoint;
// there are no pservers.
absl::StatusOr<RoleEnv> ResolveRole(const GetEnv& getenv, const RoleOverrides& flags, bool nccl2 = false);

// Every variable ResolveRole reads, for the deployment manifests' check.
const std::vector<std::string>& RoleEnvVariables();

}  // namespace oar::cli
