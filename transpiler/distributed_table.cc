// The distributed lookup table, as Fluid 1.6's transpiler lays it out.
//
// Trainer: every lookup_table op on the table (is_distributed) goes; in the
// place of the first one, split_ids(Ids: every ids variable) →
// prefetch_compress_in_tmp_<i> per pserver, prefetch(X → Out:
// prefetch_compress_out_tmp_<i>, epmap) and merge_ids(Ids, Rows, X → every
// output). After the op that computes the table's gradient:
// split_ids(table@GRAD) → table@GRAD.trainer_<t>.pserver_<i> (sync) or
// table@GRAD.pserver_<i> (async), then send of those parts.
//
// Pserver i: the table's shard `table` (SELECTED_ROWS, [ceil(rows / N),
// width]); a table optimize block (sync: sum of every trainer's part into
// table@GRAD; async: the part itself) with the table's optimizer; a
// prefetch block (lookup_sparse_table) and a checkpoint block (save of the
// table, Fluid's kLookupTablePath).
//
// Fluid 1.6 replaced any optimizer of the table with sgd (and warned); Oar
// keeps sgd, adagrad and adam (lazy: only received rows move) and refuses
// the others, so the table is never silently trained by another rule.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "transpiler/distributed_table.h"
#include "transpiler/program_edit.h"

namespace oar {
namespace {

bool IsOptimizer(const OpDesc& op) { return op.inputs.count("Param") && op.inputs.count("LearningRate"); }

std::string RoleTarget(const OpDesc& op) {
  const auto rv = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr, {});
  return rv.empty() ? "" : rv[0];
}

}  // namespace

absl::Status FindDistributedTable(TranspileState* s) {
  const BlockDesc& b = s->origin.Block(0);
  std::string table;
  for (size_t i = 0; i < b.OpSize(); ++i) {
    const OpDesc& op = b.Op(i);
    if (op.type != "lookup_table" || !op.GetAttr<bool>("is_distributed", false)) continue;
    const std::string w = op.Input("W")[0];
    if (!table.empty() && w != table) {
      return absl::InvalidArgumentError(absl::StrCat("distributed lookup tables '", table, "' and '", w,
                                                     "': a program may distribute one table (as Fluid's transpiler)"));
    }
    table = w;
  }
  if (table.empty()) return absl::OkStatus();
  DistributedTable t;
  t.name = table;
  t.grad = table + "@GRAD";
  for (size_t i = 0; i < b.OpSize(); ++i) {
    const OpDesc& op = b.Op(i);
    if (op.type == "lookup_table" && op.Input("W")[0] == table && !op.GetAttr<bool>("is_distributed", false)) {
      return absl::InvalidArgumentError(absl::StrCat("table '", table, "' is looked up both with and without ",
                                                     "is_distributed; set it on every lookup of the table"));
    }
  }
  const VarDesc* w = s->OriginVar(table);
  if (w == nullptr || w->shape.size() != 2 || w->shape[0] <= 0 || w->shape[1] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("distributed table '", table, "' must be [rows, width]"));
  }
  if (s->OriginVar(t.grad) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("distributed table '", table, "' has no gradient '", t.grad,
                                                   "' (is it trainable, and was minimize called?)"));
  }
  for (const OpDesc& op : s->optimize_ops) {
    if (RoleTarget(op) != table) continue;
    if (IsOptimizer(op)) {
      if (op.type != "sgd" && op.type != "adagrad" && op.type != "adam") {
        return absl::InvalidArgumentError(absl::StrCat("distributed table '", table, "' is updated by '", op.type,
                                                       "'; distributed tables support sgd, adagrad and adam"));
      }
      t.optimizer = op;
      continue;
    }
    for (const auto& in : op.InputArgNames()) {
      if (in == table) {
        return absl::InvalidArgumentError(absl::StrCat("distributed table '", table, "': '", op.type,
                                                       "' reads the whole table (regularization?), which lives ",
                                                       "sharded on the pservers; remove it for this parameter"));
      }
    }
    t.extra_ops.push_back(op);
  }
  if (t.optimizer.type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("distributed table '", table, "' has no optimizer op"));
  }
  s->table = std::move(t);
  return absl::OkStatus();
}

void DeclareTableSendOut(TranspileState* s) {
  if (s->table) s->table->send_out = s->NewControlVar(s->program->MutableBlock(0));
}

absl::Status ReplaceLookupsWithPrefetch(BlockDesc* main, const std::string& table,
                                        const std::vector<std::string>& pservers, int trainer_id, DistributedTable* t) {
  const size_t n = pservers.size();
  int64_t at = -1;
  std::vector<std::string> ids, outs;
  for (size_t i = main->OpSize(); i-- > 0;) {
    const OpDesc& op = main->Op(i);
    if (op.type != "lookup_table" || op.Input("W")[0] != table) continue;
    ids.insert(ids.begin(), op.Input("Ids")[0]);
    outs.insert(outs.begin(), op.Output("Out")[0]);
    main->RemoveOps(i, i + 1);
    at = static_cast<int64_t>(i);
  }
  if (at < 0) return absl::InvalidArgumentError(absl::StrCat("no lookup of the table '", table, "' to prefetch"));
  const VarDesc* id_var = main->FindVar(ids[0]);
  const VarDesc* out_var = main->FindVar(outs[0]);
  if (id_var == nullptr || out_var == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the lookups of '", table, "' use undeclared variables"));
  }
  std::vector<std::string> in_names, out_names;
  t->prefetch_in.clear();
  t->prefetch_out.clear();
  for (size_t i = 0; i < n; ++i) {
    VarDesc a = *id_var, b = *out_var;
    a.name = absl::StrCat("prefetch_compress_in_tmp_", i);
    b.name = absl::StrCat("prefetch_compress_out_tmp_", i);
    a.persistable = b.persistable = false;
    *main->Var(a.name) = a;
    *main->Var(b.name) = b;
    t->prefetch_in.push_back(a);
    t->prefetch_out.push_back(b);
    in_names.push_back(a.name);
    out_names.push_back(b.name);
  }
  size_t pos = static_cast<size_t>(at);
  *main->InsertOp(pos++) = MakeOp("split_ids", {{"Ids", ids}}, {{"Out", in_names}});
  *main->InsertOp(pos++) = MakeOp("prefetch", {{"X", in_names}}, {{"Out", out_names}},
                                  {{"epmap", pservers}, {"trainer_id", int32_t{trainer_id}}});
  *main->InsertOp(pos++) = MakeOp("merge_ids", {{"Ids", ids}, {"Rows", in_names}, {"X", out_names}}, {{"Out", outs}});
  t->ids = ids;
  t->outs = outs;
  return absl::OkStatus();
}

absl::Status TranspileTableTrainer(TranspileState* s) {
  if (!s->table) return absl::OkStatus();
  DistributedTable& t = *s->table;
  BlockDesc* main = s->program->MutableBlock(0);
  const size_t n = s->pservers.size();
  size_t pos = 0;
  // 1. the lookups → split_ids, prefetch, merge_ids at the first one.
  OAR_RETURN_IF_ERROR(ReplaceLookupsWithPrefetch(main, t.name, s->pservers, s->trainer_id, &t));
  // 2. the gradient → split_ids by pserver → send.
  const int64_t writer = FindLastWriter(*main, t.grad);
  if (writer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("no op computes the gradient '", t.grad, "' of the table"));
  }
  const VarDesc& g = *main->FindVar(t.grad);
  std::vector<std::string> parts;
  for (size_t i = 0; i < n; ++i) {
    VarDesc p = g;
    p.name = s->sync ? absl::StrCat(t.grad, ".trainer_", s->trainer_id, ".pserver_", i)
                     : absl::StrCat(t.grad, ".pserver_", i);
    p.persistable = false;
    *main->Var(p.name) = p;
    parts.push_back(p.name);
  }
  pos = static_cast<size_t>(writer) + 1;
  *main->InsertOp(pos++) = MakeOp("split_ids", {{"Ids", {t.grad}}}, {{"Out", parts}}, {}, OpRole::kDist);
  std::map<std::string, Attribute> attrs = {
      {"epmap", s->pservers},
      {"sections", std::vector<int32_t>{}},
      {"send_varnames", std::vector<std::string>{}},
      {"trainer_id", int32_t{s->trainer_id}},
      {kOpRoleVarAttr, std::vector<std::string>{t.name, t.grad}},
      {"sync_mode", !s->sync},
  };
  OpDesc::VarMap outs;
  if (s->sync || s->config.half_async) outs["Out"] = {t.send_out};  // what a barrier waits for
  *main->InsertOp(pos++) = MakeOp("send", {{"X", parts}}, outs, attrs, OpRole::kRPC);
  return absl::OkStatus();
}

absl::Status BuildTableBlocks(const TranspileState& s, const std::string& ep, int32_t parent, ProgramDesc* prog,
                              TableBlocks* out) {
  const DistributedTable& t = *s.table;
  const size_t index = static_cast<size_t>(std::find(s.pservers.begin(), s.pservers.end(), ep) - s.pservers.begin());
  BlockDesc* global = prog->MutableBlock(0);
  const VarDesc& origin = *s.OriginVar(t.name);
  const int64_t n = static_cast<int64_t>(s.pservers.size());
  const std::vector<int64_t> shard = {(origin.shape[0] + n - 1) / n, origin.shape[1]};
  VarDesc table = origin;
  table.type = paddle::framework::proto::VarType::SELECTED_ROWS;
  table.shape = shard;
  table.persistable = true;
  *global->Var(t.name) = table;
  VarDesc grad = *s.OriginVar(t.grad);
  CloneVar(global, grad);
  const std::string lr = t.optimizer.Input("LearningRate")[0];
  if (!global->HasVar(lr)) CloneVar(global, *s.OriginVar(lr));

  BlockDesc* opt = prog->AppendBlock(parent);
  out->optimize_block = opt->idx();
  std::string grad_name = t.grad;
  if (s.sync) {
    std::vector<std::string> copies;
    for (int k = 0; k < s.trainers; ++k) {
      VarDesc c = grad;
      c.name = absl::StrCat(t.grad, ".trainer_", k, ".pserver_", index);
      c.persistable = false;
      *global->Var(c.name) = c;
      copies.push_back(c.name);
    }
    *opt->AppendOp() = MakeOp("sum", {{"X", copies}}, {{"Out", {t.grad}}}, {{"use_mkldnn", false}});
  } else {  // async: the part this pserver receives is the gradient
    grad_name = absl::StrCat(t.grad, ".pserver_", index);
    global->RemoveVar(t.grad);
    grad.name = grad_name;
    *global->Var(grad_name) = grad;
  }
  if (t.optimizer.type == "sgd") {  // Fluid's op exactly
    *opt->AppendOp() =
        MakeOp("sgd", {{"Param", {t.name}}, {"Grad", {grad_name}}, {"LearningRate", {lr}}}, {{"ParamOut", {t.name}}});
  } else {  // adagrad, adam: accumulators of the table's shape are tables too
    OpDesc op = t.optimizer;
    for (auto* slots : {&op.inputs, &op.outputs}) {
      for (auto& [slot, args] : *slots) {
        for (auto& a : args) {
          if (slot == "Param" || slot == "ParamOut") {
            a = t.name;
          } else if (slot == "Grad") {
            a = grad_name;
          } else if (!global->HasVar(a)) {
            VarDesc v = *s.OriginVar(a);
            if (v.shape == origin.shape) {
              v.type = paddle::framework::proto::VarType::SELECTED_ROWS;
              v.shape = shard;
            }
            *global->Var(a) = v;
          }
        }
      }
    }
    *opt->AppendOp() = op;
    for (const OpDesc& extra : t.extra_ops) {  // Adam's beta powers
      for (const auto& a : extra.InputArgNames()) {
        if (!global->HasVar(a)) CloneVar(global, *s.OriginVar(a));
      }
      *opt->AppendOp() = extra;
    }
  }
  out->grad_to_block_id = absl::StrCat(grad_name, ":", opt->idx());

  BlockDesc* prefetch = prog->AppendBlock(opt->idx());
  const VarDesc& in = t.prefetch_in[index];
  const VarDesc& rows = t.prefetch_out[index];
  CloneVar(global, in);
  CloneVar(global, rows);
  *prefetch->AppendOp() = MakeOp("lookup_sparse_table", {{"Ids", {in.name}}, {"W", {t.name}}}, {{"Out", {rows.name}}},
                                 {{"is_sparse", true}, {"is_distributed", true}, {"padding_idx", int64_t{-1}}});
  out->prefetch_var_name_to_block_id = {absl::StrCat(in.name, ":", prefetch->idx())};

  VarDesc* path = global->Var("kLookupTablePath");
  path->type = paddle::framework::proto::VarType::RAW;
  path->persistable = true;
  BlockDesc* checkpoint = prog->AppendBlock(opt->idx());
  *checkpoint->AppendOp() = MakeOp("save", {{"X", {t.name}}}, {}, {{"file_path", std::string("none")}});
  out->checkpoint_block = checkpoint->idx();
  return absl::OkStatus();
}

}  // namespace oar
