#include "trainer/ssa_graph.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace oar {
namespace {

// What the builder knows about one variable on one place.
struct VarState {
  int last_writer = -1;
  std::vector<int> readers;  // since the last write
  int version = 0;
};

class Builder {
 public:
  Builder(size_t places) { g_.places = places; }

  size_t Add(OpHandle h, const std::vector<std::pair<size_t, std::string>>& reads,
             const std::vector<std::pair<size_t, std::string>>& writes) {
    const size_t id = g_.ops.size();
    std::set<size_t> deps;
    for (const auto& [p, name] : reads) {
      VarState& v = state_[{p, name}];
      if (v.last_writer >= 0) deps.insert(static_cast<size_t>(v.last_writer));
    }
    for (const auto& [p, name] : writes) {
      VarState& v = state_[{p, name}];
      if (v.last_writer >= 0) deps.insert(static_cast<size_t>(v.last_writer));
      for (int r : v.readers) deps.insert(static_cast<size_t>(r));
    }
    deps.erase(id);
    h.deps.assign(deps.begin(), deps.end());
    g_.ops.push_back(std::move(h));
    for (size_t d : g_.ops.back().deps) g_.ops[d].dependents.push_back(id);
    for (const auto& [p, name] : reads) state_[{p, name}].readers.push_back(static_cast<int>(id));
    for (const auto& [p, name] : writes) {
      VarState& v = state_[{p, name}];
      v.last_writer = static_cast<int>(id);
      v.readers.clear();
      g_.vars.push_back({name, p, ++v.version, static_cast<int>(id)});
    }
    return id;
  }

  SsaGraph Take() { return std::move(g_); }
  SsaGraph& graph() { return g_; }

 private:
  SsaGraph g_;
  std::map<std::pair<size_t, std::string>, VarState> state_;
};

std::vector<std::pair<size_t, std::string>> OnPlace(size_t p, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, std::string>> out;
  for (const auto& n : names) {
    if (n != kEmptyVarName) out.emplace_back(p, n);
  }
  return out;
}

}  // namespace

SsaGraph BuildSsaGraph(const BlockDesc& block, size_t places, bool all_reduce) {
  // Gradients named by op_role_var ([param, grad, ...]), and the index of
  // the last op writing each.
  std::map<std::string, size_t> last_write;
  std::vector<std::string> grads;
  if (all_reduce) {
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const auto role_var = block.Op(i).GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
      const bool backward = (block.Op(i).role() & static_cast<int32_t>(OpRole::kBackward)) != 0;
      for (size_t k = 1; backward && k < role_var.size(); k += 2) {
        if (std::find(grads.begin(), grads.end(), role_var[k]) == grads.end()) grads.push_back(role_var[k]);
      }
    }
    for (size_t i = 0; i < block.OpSize(); ++i) {
      for (const auto& out : block.Op(i).OutputArgNames()) {
        if (std::find(grads.begin(), grads.end(), out) != grads.end()) last_write[out] = i;
      }
    }
  }
  Builder b(places);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    for (size_t p = 0; p < places; ++p) {
      OpHandle h;
      h.place = p;
      h.op_index = i;
      h.label = absl::StrCat(op.type, " #", i, " @place ", p);
      b.Add(std::move(h), OnPlace(p, op.InputArgNames()), OnPlace(p, op.OutputArgNames()));
    }
    for (const auto& [grad, at] : last_write) {
      if (at != i) continue;
      OpHandle h;
      h.kind = OpHandle::Kind::kAllReduce;
      h.var = grad;
      h.label = absl::StrCat("all_reduce(", grad, ")");
      std::vector<std::pair<size_t, std::string>> all;
      for (size_t p = 0; p < places; ++p) all.emplace_back(p, grad);
      b.Add(std::move(h), all, all);
      b.graph().gradients.push_back(grad);
    }
  }
  return b.Take();
}

std::string ToGraphviz(const SsaGraph& g) {
  std::string dot = "digraph ssa_graph {\n  rankdir=TB;\n";
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpHandle& h = g.ops[i];
    std::string label = h.label;
    for (char& c : label) if (c == '"') c = '\'';
    absl::StrAppend(&dot, "  op", i, " [label=\"", label, "\"",
                    h.kind == OpHandle::Kind::kAllReduce ? ", shape=box, style=filled, fillcolor=lightblue" : "",
                    "];\n");
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (size_t d : g.ops[i].deps) absl::StrAppend(&dot, "  op", d, " -> op", i, ";\n");
  }
  absl::StrAppend(&dot, "}\n");
  return dot;
}

}  // namespace oar
