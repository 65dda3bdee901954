#include "trainer/ssa_graph.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/framework/ddim.h"

namespace oar {
namespace {

// What the builder knows about one variable on one place.
struct VarState {
  std::vector<int> writers;  // the last write: one handle, or a group of chunk handles
  std::vector<int> readers;  // since the last write
  int version = 0;
};

class Builder {
 public:
  Builder(size_t places) { g_.places = places; }

  size_t Add(OpHandle h, const std::vector<std::pair<size_t, std::string>>& reads,
             const std::vector<std::pair<size_t, std::string>>& writes) {
    std::vector<OpHandle> group;
    group.push_back(std::move(h));
    return AddGroup(std::move(group), reads, writes);
  }

  // Handles that together perform one access (e.g. the chunks of one
  // all-reduce): each depends on what the access depends on, and later
  // accesses depend on all of them. Returns the first handle's index.
  size_t AddGroup(std::vector<OpHandle> group, const std::vector<std::pair<size_t, std::string>>& reads,
                  const std::vector<std::pair<size_t, std::string>>& writes) {
    const size_t first = g_.ops.size();
    std::set<size_t> deps;
    for (const auto& [p, name] : reads) {
      for (int w : state_[{p, name}].writers) deps.insert(static_cast<size_t>(w));
    }
    for (const auto& [p, name] : writes) {
      VarState& v = state_[{p, name}];
      for (int w : v.writers) deps.insert(static_cast<size_t>(w));
      for (int r : v.readers) deps.insert(static_cast<size_t>(r));
    }
    std::vector<int> ids;
    for (OpHandle& h : group) {
      const size_t id = g_.ops.size();
      ids.push_back(static_cast<int>(id));
      h.deps.assign(deps.begin(), deps.end());
      g_.ops.push_back(std::move(h));
      for (size_t d : g_.ops.back().deps) g_.ops[d].dependents.push_back(id);
    }
    for (const auto& [p, name] : reads) {
      auto& readers = state_[{p, name}].readers;
      readers.insert(readers.end(), ids.begin(), ids.end());
    }
    for (const auto& [p, name] : writes) {
      VarState& v = state_[{p, name}];
      v.writers = ids;
      v.readers.clear();
      g_.vars.push_back({name, p, ++v.version, ids.front()});
    }
    return first;
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

SsaGraph BuildSsaGraph(const BlockDesc& block, size_t places, GradientMode mode, CrossTrainer cross) {
  // A transpiled trainer program talks to pservers (ops with role RPC or
  // Dist): they run once, on place 0, after the gradients are all-reduced;
  // the parameters they bring back are broadcast to the other places.
  const int32_t kDistRoles = static_cast<int32_t>(OpRole::kRPC) | static_cast<int32_t>(OpRole::kDist);
  auto is_dist = [&](const OpDesc& op) { return places > 1 && (op.role() & kDistRoles) != 0; };
  std::map<std::string, size_t> last_dist_write;  // persistable outputs of dist ops
  for (size_t i = 0; i < block.OpSize(); ++i) {
    if (!is_dist(block.Op(i))) continue;
    for (const auto& out : block.Op(i).OutputArgNames()) {
      const VarDesc* v = block.FindVarRecursive(out);
      if (v != nullptr && v->persistable) last_dist_write[out] = i;
    }
  }
  if (!last_dist_write.empty() && mode == GradientMode::kReduce) mode = GradientMode::kAllReduce;
  if (cross.enabled) mode = GradientMode::kAllReduce;  // hierarchical: reduce, across, broadcast
  // Gradients and their parameters, named by backward ops' op_role_var
  // ([param, grad, ...]); the last op writing each gradient; and, for
  // kReduce, each gradient's owner place and the last optimize op writing
  // each parameter.
  std::vector<std::string> grads;
  std::map<std::string, std::string> param_of;
  std::map<std::string, size_t> last_write, owner, last_update;
  const int32_t kBackward = static_cast<int32_t>(OpRole::kBackward);
  const int32_t kOptimize = static_cast<int32_t>(OpRole::kOptimize);
  if (mode != GradientMode::kNone || cross.enabled) {
    for (size_t i = 0; i < block.OpSize(); ++i) {
      if (!(block.Op(i).role() & kBackward)) continue;
      const auto role_var = block.Op(i).GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
      for (size_t k = 1; k < role_var.size(); k += 2) {
        if (param_of.count(role_var[k])) continue;
        param_of[role_var[k]] = role_var[k - 1];
        owner[role_var[k]] = grads.size() % places;
        grads.push_back(role_var[k]);
      }
    }
    for (size_t i = 0; i < block.OpSize(); ++i) {
      for (const auto& out : block.Op(i).OutputArgNames()) {
        if (param_of.count(out)) last_write[out] = i;
      }
    }
  }
  // Across trainers: buckets of dense gradients in the order backward
  // writes them, each closed at `bucket_bytes`; a sparse gradient (or one of
  // unknown size) goes alone. The bucket's handle follows its last write.
  std::map<size_t, std::vector<std::vector<std::string>>> buckets_at;  // op index → buckets closed there
  if (cross.enabled) {
    std::vector<std::pair<size_t, std::string>> order;
    for (const auto& [g, at] : last_write) order.emplace_back(at, g);
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return std::find(grads.begin(), grads.end(), a.second) < std::find(grads.begin(), grads.end(), b.second);
    });
    std::vector<std::string> open;
    int64_t open_bytes = 0;
    size_t open_at = 0;
    DataType open_dtype = DataType::kFloat32;
    auto close = [&] {
      if (!open.empty()) buckets_at[open_at].push_back(open);
      open.clear();
      open_bytes = 0;
    };
    for (const auto& [at, g] : order) {
      const VarDesc* v = block.FindVarRecursive(g);
      const bool dense = v != nullptr && v->type == paddle::framework::proto::VarType::LOD_TENSOR &&
                         !DDim(v->shape).HasUnknown() && !v->shape.empty();
      const int64_t bytes = dense ? DDim(v->shape).numel() * static_cast<int64_t>(SizeOf(v->dtype)) : 0;
      if (!dense || cross.bucket_bytes <= 0) {
        close();
        buckets_at[at].push_back({g});
        continue;
      }
      if (!open.empty() && (open_bytes + bytes > cross.bucket_bytes || v->dtype != open_dtype)) close();
      open_dtype = v->dtype;
      open.push_back(g);
      open_bytes += bytes;
      open_at = at;
    }
    close();
  }
  // The owner of an optimize op under kReduce (none: every place runs it).
  auto optimize_owner = [&](const OpDesc& op) -> int {
    if (mode != GradientMode::kReduce || !(op.role() & kOptimize)) return -1;
    const auto role_var = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
    if (role_var.size() < 2 || !owner.count(role_var[1])) return -1;
    return static_cast<int>(owner[role_var[1]]);
  };
  std::map<std::string, size_t> param_owner;
  for (const auto& [grad, param] : param_of) param_owner[param] = owner[grad];
  if (mode == GradientMode::kReduce) {
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const OpDesc& op = block.Op(i);
      if (optimize_owner(op) < 0) continue;
      const std::string param = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr)[0];  // GetAttr returns a copy
      for (const auto& out : op.OutputArgNames()) {
        if (out == param) last_update[param] = i;
      }
    }
  }
  Builder b(places);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    const int only = is_dist(op) ? 0 : optimize_owner(op);
    for (size_t p = 0; p < places; ++p) {
      if (only >= 0 && static_cast<size_t>(only) != p) continue;
      OpHandle h;
      h.place = p;
      h.op_index = i;
      h.label = absl::StrCat(op.type, " #", i, " @place ", p);
      b.Add(std::move(h), OnPlace(p, op.InputArgNames()), OnPlace(p, op.OutputArgNames()));
    }
    for (const auto& [grad, at] : last_write) {
      if (at != i) continue;
      OpHandle h;
      h.var = grad;
      std::vector<std::pair<size_t, std::string>> all;
      for (size_t p = 0; p < places; ++p) all.emplace_back(p, grad);
      if (cross.enabled) {  // onto place 0 first; across trainers below
        if (places > 1) {
          h.kind = OpHandle::Kind::kReduce;
          h.place = 0;
          h.label = absl::StrCat("reduce(", grad, ") -> place 0");
          b.Add(std::move(h), all, {{0, grad}});
        }
        b.graph().gradients.push_back(grad);
        continue;
      }
      if (mode == GradientMode::kReduce) {
        h.kind = OpHandle::Kind::kReduce;
        h.place = owner[grad];
        h.label = absl::StrCat("reduce(", grad, ") -> place ", h.place);
        b.Add(std::move(h), all, {{owner[grad], grad}});
      } else {
        // One handle per place, each summing its slice of the gradient
        // (a dense one; a sparse one is merged by chunk 0 alone).
        std::vector<OpHandle> chunks;
        for (size_t k = 0; k < places; ++k) {
          OpHandle c = h;
          c.kind = OpHandle::Kind::kAllReduce;
          c.place = k;
          c.chunk = k;
          c.chunks = places;
          c.label = absl::StrCat("all_reduce(", grad, ") part ", k + 1, "/", places);
          chunks.push_back(std::move(c));
        }
        b.AddGroup(std::move(chunks), all, all);
      }
      b.graph().gradients.push_back(grad);
    }
    for (const auto& bucket : buckets_at[i]) {
      OpHandle h;
      h.kind = OpHandle::Kind::kCrossAllReduce;
      h.place = 0;
      h.vars = bucket;
      h.var = bucket.front();
      h.cross_index = b.graph().cross_ops++;
      h.label = absl::StrCat("all_reduce across trainers(", absl::StrJoin(bucket, ", "), ")");
      b.Add(std::move(h), OnPlace(0, bucket), OnPlace(0, bucket));
      for (const auto& g : bucket) {
        if (places < 2) continue;
        OpHandle bc;
        bc.kind = OpHandle::Kind::kBroadcast;
        bc.var = g;
        bc.place = 0;
        bc.label = absl::StrCat("broadcast(", g, ") from place 0");
        std::vector<std::pair<size_t, std::string>> others;
        for (size_t p = 1; p < places; ++p) others.emplace_back(p, g);
        b.Add(std::move(bc), {{0, g}}, others);
      }
    }
    std::vector<std::pair<std::string, size_t>> broadcasts;
    for (const auto& [param, at] : last_update) {
      if (at == i) broadcasts.emplace_back(param, param_owner[param]);
    }
    for (const auto& [param, at] : last_dist_write) {
      if (at == i) broadcasts.emplace_back(param, 0);
    }
    for (const auto& [param, from] : broadcasts) {
      OpHandle h;
      h.kind = OpHandle::Kind::kBroadcast;
      h.var = param;
      h.place = from;
      h.label = absl::StrCat("broadcast(", param, ") from place ", from);
      std::vector<std::pair<size_t, std::string>> others;
      for (size_t p = 0; p < places; ++p) {
        if (p != from) others.emplace_back(p, param);
      }
      b.Add(std::move(h), {{from, param}}, others);
    }
  }
  return b.Take();
}

std::string ToGraphviz(const SsaGraph& g) {
  std::string dot = "digraph ssa_graph {\n  rankdir=TB;\n";
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpHandle& h = g.ops[i];
    std::string label = h.label;
    for (char& c : label)
      if (c == '"') c = '\'';
    absl::StrAppend(&dot, "  op", i, " [label=\"", label, "\"",
                    h.kind == OpHandle::Kind::kCompute ? "" : ", shape=box, style=filled, fillcolor=lightblue", "];\n");
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (size_t d : g.ops[i].deps) absl::StrAppend(&dot, "  op", d, " -> op", i, ";\n");
  }
  absl::StrAppend(&dot, "}\n");
  return dot;
}

}  // namespace oar
