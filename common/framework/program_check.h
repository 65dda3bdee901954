// Every op of a program checked against the op registry in one pass, so a
// user learns all that Oar refuses in a program at once — grouped by op type
// and reason, with how often and where first — rather than one refusal per
// attempt. A refusal is what CheckAndFill or the registry would stop the
// program's executor on: an unknown op type, a slot bound to a variable Oar
// does not read, a missing required slot, an attribute of the wrong type or
// of a value the kernels do not implement.
//
//   std::vector<OpRefusal> r = FindRefusals(program, OpRegistry::Global());
//   OAR_RETURN_IF_ERROR(RefusalsError(r, "main.pb"));  // OK when r is empty
//
// Thread-safety: functions of their arguments; the registry is read only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_desc.h"

namespace oar {

struct OpRefusal {
  std::string op_type;
  std::string reason;       // without the "<op type>: " prefix
  int count = 0;            // ops of this type refused for this reason
  std::string first_where;  // "block 0, op #12"
  bool unknown_type = false;
};

// In order of first appearance.
std::vector<OpRefusal> FindRefusals(const ProgramDesc& program, const OpRegistry& registry);

// OK when `refusals` is empty; else Unimplemented naming `what` (a file, a
// program's role) and listing every group on its own line.
absl::Status RefusalsError(const std::vector<OpRefusal>& refusals, const std::string& what);

}  // namespace oar
