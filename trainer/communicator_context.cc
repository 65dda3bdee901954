#include "trainer/communicator_context.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"

namespace oar {
namespace {

template <typename T>
std::vector<T> AttrOr(const OpDesc& op, const std::string& name) {
  return op.HasAttr(name) ? op.GetAttr<std::vector<T>>(name) : std::vector<T>{};
}

int32_t TrainerId(const OpDesc& op) { return op.HasAttr("trainer_id") ? op.GetAttr<int32_t>("trainer_id") : 0; }

absl::Status Mismatch(const OpDesc& op, const std::string& var, size_t blocks, const std::string& attr, size_t n) {
  return absl::InvalidArgumentError(
      absl::StrCat(op.type, " of '", var, "': ", blocks, " block(s) but ", n, " entries in ", attr));
}

// X (send) or Out (recv) with the blocks `names` (send_varnames or
// recv_varnames): one variable cut into them, or a variable per block.
absl::Status AddContexts(const OpDesc& op, const std::vector<std::string>& vars, const std::vector<std::string>& names,
                         std::map<std::string, VarContext>* into) {
  const auto epmap = AttrOr<std::string>(op, "epmap");
  if (!names.empty() && vars.size() == 1) {
    VarContext c{vars[0], names, epmap, {}, TrainerId(op), op.GetAttr<bool>("merge_add", false)};
    if (epmap.size() != names.size()) return Mismatch(op, vars[0], names.size(), "epmap", epmap.size());
    if (op.type == "send") {
      for (int32_t rows : AttrOr<int32_t>(op, "sections")) c.sections.push_back(rows);
      if (c.sections.size() != names.size() && !(names.size() == 1 && c.sections.empty())) {
        return Mismatch(op, vars[0], names.size(), "sections", c.sections.size());
      }
      if (names.size() == 1) c.sections.clear();  // one block: the whole variable
    }
    (*into)[vars[0]] = std::move(c);
    return absl::OkStatus();
  }
  if (epmap.size() != vars.size()) {
    return Mismatch(op, absl::StrJoin(vars, ", "), vars.size(), "epmap", epmap.size());
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    const std::string remote = names.size() == vars.size() ? names[i] : vars[i];
    (*into)[vars[i]] =
        VarContext{vars[i], {remote}, {epmap[i]}, {}, TrainerId(op), op.GetAttr<bool>("merge_add", false)};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommunicatorContexts> ContextsOf(const ProgramDesc& trainer_program) {
  CommunicatorContexts c;
  const BlockDesc& block = trainer_program.Block(0);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    if (op.type == "send") {
      OAR_RETURN_IF_ERROR(AddContexts(op, op.Input("X"), AttrOr<std::string>(op, "send_varnames"), &c.send));
    } else if (op.type == "recv") {
      auto names = AttrOr<std::string>(op, "recv_varnames");
      if (names.empty()) names = AttrOr<std::string>(op, "varnames");
      OAR_RETURN_IF_ERROR(AddContexts(op, op.Output("Out"), names, &c.recv));
    }
  }
  return c;
}

}  // namespace oar
