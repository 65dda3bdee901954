#include "cli/role_env.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"

namespace oar::cli {
namespace {

// One value that may come from a flag, a variable or its alias: the flag
// wins; a variable and its alias that disagree are an error.
absl::StatusOr<std::optional<std::string>> Pick(const GetEnv& getenv, const std::optional<std::string>& flag,
                                                const std::string& flag_name, const char* var,
                                                const char* alias = nullptr) {
  if (flag) return flag;
  const char* a = getenv(var);
  const char* b = alias ? getenv(alias) : nullptr;
  if (a && b && std::string(a) != b) {
    return absl::InvalidArgumentError(
        absl::StrCat(var, "=", a, " and ", alias, "=", b, " disagree; set one (or --", flag_name, ")"));
  }
  if (a) return std::optional<std::string>(a);
  if (b) return std::optional<std::string>(b);
  return std::optional<std::string>();
}

absl::StatusOr<int> ParseInt(const std::string& value, const std::string& what) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v))
    return absl::InvalidArgumentError(absl::StrCat(what, "='", value, "' is not a number"));
  return v;
}

// "a:1, b:2" as the transpiler reads it: each item trimmed, empty ones dropped.
std::vector<std::string> SplitList(const std::string& v) {
  std::vector<std::string> items;
  for (absl::string_view e : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    items.emplace_back(absl::StripAsciiWhitespace(e));
  }
  return items;
}

}  // namespace

const std::vector<std::string>& RoleEnvVariables() {
  static const auto* vars = new std::vector<std::string>{"PADDLE_TRAINING_ROLE",
                                                         "TRAINING_ROLE",
                                                         "PADDLE_TRAINER_ID",
                                                         "PADDLE_TRAINERS_NUM",
                                                         "PADDLE_PSERVER_ENDPOINTS",
                                                         "PADDLE_PSERVERS_IP_PORT_LIST",
                                                         "PADDLE_CURRENT_ENDPOINT",
                                                         "POD_IP",
                                                         "PADDLE_PORT",
                                                         "PADDLE_TRAINER_ENDPOINTS"};
  return *vars;
}

absl::StatusOr<RoleEnv> ResolveRole(const GetEnv& getenv, const RoleOverrides& flags, bool nccl2) {
  RoleEnv env;
  OAR_ASSIGN_OR_RETURN(auto role, Pick(getenv, flags.role, "role", "PADDLE_TRAINING_ROLE", "TRAINING_ROLE"));
  if (!role) return absl::InvalidArgumentError("PADDLE_TRAINING_ROLE is not set (TRAINER or PSERVER; or --role)");
  const std::string r = absl::AsciiStrToUpper(*role);
  if (r == "TRAINER") {
    env.role = RoleEnv::Role::kTrainer;
  } else if (r == "PSERVER") {
    env.role = RoleEnv::Role::kPserver;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("PADDLE_TRAINING_ROLE='", *role, "': use TRAINER or PSERVER"));
  }
  if (nccl2 && env.role == RoleEnv::Role::kPserver) {
    return absl::InvalidArgumentError("PADDLE_TRAINING_ROLE=PSERVER in nccl2 mode, which has no pservers");
  }
  std::optional<std::string> trainers;
  if (flags.trainers) {
    trainers = std::to_string(*flags.trainers);
  } else if (const char* t = getenv("PADDLE_TRAINERS_NUM")) {
    trainers = t;
  }
  if (!trainers) return absl::InvalidArgumentError("PADDLE_TRAINERS_NUM is not set (or --trainers)");
  OAR_ASSIGN_OR_RETURN(env.trainers, ParseInt(*trainers, "PADDLE_TRAINERS_NUM"));
  if (env.trainers < 1)
    return absl::InvalidArgumentError(absl::StrCat("PADDLE_TRAINERS_NUM=", env.trainers, " must be >= 1"));
  std::optional<std::string> id;
  if (flags.trainer_id) {
    id = std::to_string(*flags.trainer_id);
  } else if (const char* t = getenv("PADDLE_TRAINER_ID")) {
    id = t;
  }
  if (!id && env.role == RoleEnv::Role::kTrainer) {
    return absl::InvalidArgumentError("PADDLE_TRAINER_ID is not set for a TRAINER (or --trainer_id)");
  }
  if (id) {
    OAR_ASSIGN_OR_RETURN(env.trainer_id, ParseInt(*id, "PADDLE_TRAINER_ID"));
  }
  if (env.role == RoleEnv::Role::kTrainer && (env.trainer_id < 0 || env.trainer_id >= env.trainers)) {
    return absl::InvalidArgumentError(absl::StrCat("PADDLE_TRAINER_ID=", env.trainer_id, " is not in [0, ",
                                                   env.trainers, ") (PADDLE_TRAINERS_NUM=", env.trainers, ")"));
  }
  // This process's endpoint: PADDLE_CURRENT_ENDPOINT, or POD_IP:PADDLE_PORT.
  std::optional<std::string> current = flags.current_endpoint;
  if (!current) {
    const char* cur = getenv("PADDLE_CURRENT_ENDPOINT");
    const char* ip = getenv("POD_IP");
    const char* port = getenv("PADDLE_PORT");
    std::optional<std::string> pod;
    if (ip && port) pod = absl::StrCat(ip, ":", port);
    if (cur && pod && *pod != cur) {
      return absl::InvalidArgumentError(
          absl::StrCat("PADDLE_CURRENT_ENDPOINT=", cur, " and POD_IP:PADDLE_PORT=", *pod, " disagree"));
    }
    if (cur) current = cur;
    if (!current && pod) current = pod;
  }
  if (current) env.current_endpoint = *current;
  if (nccl2) {
    OAR_ASSIGN_OR_RETURN(auto list,
                         Pick(getenv, flags.trainer_endpoints, "trainer_endpoints", "PADDLE_TRAINER_ENDPOINTS"));
    if (!list)
      return absl::InvalidArgumentError("PADDLE_TRAINER_ENDPOINTS is not set (nccl2 mode; or --trainer_endpoints)");
    env.trainer_endpoints = SplitList(*list);
    if (static_cast<int>(env.trainer_endpoints.size()) != env.trainers) {
      return absl::InvalidArgumentError(absl::StrCat("PADDLE_TRAINER_ENDPOINTS lists ", env.trainer_endpoints.size(),
                                                     " endpoints but PADDLE_TRAINERS_NUM=", env.trainers));
    }
    if (!current) {
      return absl::InvalidArgumentError("PADDLE_CURRENT_ENDPOINT (or POD_IP and PADDLE_PORT) is not set (nccl2 mode)");
    }
    return env;
  }
  OAR_ASSIGN_OR_RETURN(
      auto ps, Pick(getenv, flags.pservers, "pservers", "PADDLE_PSERVER_ENDPOINTS", "PADDLE_PSERVERS_IP_PORT_LIST"));
  if (!ps) return absl::InvalidArgumentError("PADDLE_PSERVER_ENDPOINTS is not set (or --pservers)");
  env.pservers = SplitList(*ps);
  if (env.pservers.empty()) return absl::InvalidArgumentError("PADDLE_PSERVER_ENDPOINTS is empty");
  // A pserver job's trainers may know each other too (Fluid's role makers
  // set it): the data layer's global shuffle joins them over it.
  OAR_ASSIGN_OR_RETURN(auto trainer_list,
                       Pick(getenv, flags.trainer_endpoints, "trainer_endpoints", "PADDLE_TRAINER_ENDPOINTS"));
  if (trainer_list) {
    env.trainer_endpoints = SplitList(*trainer_list);
    if (static_cast<int>(env.trainer_endpoints.size()) != env.trainers) {
      return absl::InvalidArgumentError(absl::StrCat("PADDLE_TRAINER_ENDPOINTS lists ", env.trainer_endpoints.size(),
                                                     " endpoints but PADDLE_TRAINERS_NUM=", env.trainers));
    }
  }
  if (env.role == RoleEnv::Role::kPserver) {
    if (!current) {
      return absl::InvalidArgumentError(
          "PADDLE_CURRENT_ENDPOINT (or POD_IP and PADDLE_PORT) is not set for a PSERVER (or --current_endpoint)");
    }
    if (std::find(env.pservers.begin(), env.pservers.end(), *current) == env.pservers.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("this pserver's endpoint ", *current,
                       " is not in PADDLE_PSERVER_ENDPOINTS=", absl::StrJoin(env.pservers, ",")));
    }
  }
  return env;
}

}  // namespace oar::cli
