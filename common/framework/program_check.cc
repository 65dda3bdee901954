#include "common/framework/program_check.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace oar {

std::vector<OpRefusal> FindRefusals(const ProgramDesc& program, const OpRegistry& registry) {
  std::vector<OpRefusal> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t b = 0; b < program.NumBlocks(); ++b) {
    const BlockDesc& block = program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      OpDesc op = block.Op(i);
      const OpInfo* info = registry.Find(op.type);
      std::string reason;
      if (info == nullptr) {
        reason = "Oar has no such op";
      } else if (absl::Status s = info->CheckAndFill(&op); !s.ok()) {
        reason = std::string(s.message());
        const std::string prefix = op.type + ": ";
        if (absl::StartsWith(reason, prefix)) reason = reason.substr(prefix.size());
      } else {
        continue;
      }
      auto [it, added] = index.emplace(std::make_pair(op.type, reason), out.size());
      if (added) out.push_back({op.type, reason, 0, absl::StrCat("block ", b, ", op #", i), info == nullptr});
      ++out[it->second].count;
    }
  }
  return out;
}

absl::Status RefusalsError(const std::vector<OpRefusal>& refusals, const std::string& what) {
  if (refusals.empty()) return absl::OkStatus();
  int ops = 0;
  for (const OpRefusal& r : refusals) ops += r.count;
  std::string msg =
      absl::StrCat(what, ": Oar cannot run ", ops, " op(s) of this program, for ", refusals.size(), " reason(s):");
  for (const OpRefusal& r : refusals) {
    absl::StrAppend(&msg, "\n  ", r.op_type, " (x", r.count, ", first at ", r.first_where, "): ", r.reason);
  }
  return absl::UnimplementedError(msg);
}

}  // namespace oar
