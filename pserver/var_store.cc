#include "pserver/var_store.h"

#include "pserver/var_store_receivable.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"

namespace oar {

// What places a variable on a pserver, for errors about one that is not
// there: a trainer that differs in these sends it elsewhere.
constexpr char kPlacementHint[] =
    "; was the trainer started with the same model and the same PADDLE_PSERVER_ENDPOINTS, in the same order?";
namespace {

namespace proto = paddle::framework::proto;

std::string TrainerCopy(const std::string& name, int t) { return absl::StrCat(name, ".trainer_", t); }

// "fc_w@GRAD.trainer_1" → ("fc_w@GRAD", 1); no suffix → (name, -1).
std::pair<std::string, int> SplitTrainerSuffix(const std::string& name) {
  const size_t at = name.rfind(".trainer_");
  int id = -1;
  if (at == std::string::npos || !absl::SimpleAtoi(name.substr(at + 9), &id) || id < 0) return {name, -1};
  return {name.substr(0, at), id};
}

}  // namespace

VarStore::VarStore(const ProgramDesc& program, Scope* scope, int fanin, bool sync) : scope_(scope), fanin_(fanin) {}
VarStore::~VarStore() = default;

absl::StatusOr<std::unique_ptr<VarStore>> VarStore::Create(const ProgramDesc& program, Scope* scope, int fanin,
                                                           bool sync_mode,
                                                           const std::map<std::string, int>& grad_to_block_id,
                                                           bool elastic) {
  std::unique_ptr<VarStore> s(new VarStore(program, scope, fanin, sync_mode));
  size_t merged_dense = 0;
  uint64_t merged_bytes = 0;
  const BlockDesc& global = program.Block(0);
  for (const auto& [name, block] : grad_to_block_id) {
    const VarDesc* desc = global.FindVar(name);
    if (desc == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("grad_to_block_id names '", name, "', which the pserver program does not declare"));
    }
    auto r = std::make_unique<Receivable>();
    r->name = name;
    r->block = block;
    r->desc = desc;
    // Per-trainer copies: `g.trainer_<t>`, or the names the block's leading
    // `sum` reads (Fluid's distributed table: `g.trainer_<t>.pserver_<i>`).
    const BlockDesc& b = program.Block(static_cast<size_t>(block));
    const bool leading_sum = b.OpSize() >= 1 && b.Op(0).type == "sum" &&
                             b.Op(0).Output("Out") == std::vector<std::string>{name} &&
                             b.Op(0).Input("X").size() == static_cast<size_t>(fanin);
    std::vector<std::string> copies;
    for (int t = 0; sync_mode && (fanin > 1 || leading_sum) && t < fanin; ++t) {
      std::string c = TrainerCopy(name, t);
      if (global.FindVar(c) == nullptr && leading_sum) c = b.Op(0).Input("X")[static_cast<size_t>(t)];
      const bool own = c.find(absl::StrCat(".trainer_", t)) != std::string::npos;
      if (global.FindVar(c) == nullptr || !own) {
        copies.clear();
        break;
      }
      copies.push_back(c);
    }
    if (!copies.empty()) {
      r->mode = Receivable::Mode::kPerTrainer;
      r->copies = copies;
      r->desc = global.FindVar(copies[0]);
      // Fluid's merge at the head of the block (sum of the copies, in
      // trainer order, into `name`; a scale may follow): done as they
      // arrive; in an elastic job from the copies, once the step's
      // contributors are known or likely (a dense gradient; a sparse one
      // is summed by the block over its copies: FinalizeAmong).
      const bool dense = r->desc->type != proto::VarType::SELECTED_ROWS;
      if (leading_sum && b.Op(0).Input("X") == copies && (!elastic || dense)) {
        r->mode = Receivable::Mode::kMerged;
        r->keep_copies = elastic;
        s->merged_blocks_.insert(block);
      }
      for (int t = 0; t < fanin; ++t) s->copy_of_[copies[static_cast<size_t>(t)]] = {r.get(), t};
    }
    r->sparse = r->desc->type == proto::VarType::SELECTED_ROWS;
    // The largest message: the declared tensor (a sparse one at least as
    // many rows as its height, or 64Ki), plus its rows and a header.
    std::vector<int64_t> shape = r->desc->shape;
    uint64_t bytes = 0;
    if (!shape.empty() && std::all_of(shape.begin() + 1, shape.end(), [](int64_t d) { return d >= 0; })) {
      const int64_t rows = r->sparse ? std::max<int64_t>(shape[0], 65536) : shape[0];
      if (rows >= 0) {
        shape[0] = rows;
        auto b = rpc::CheckedBytes(DDim(shape), r->desc->dtype);
        if (b.ok()) bytes = *b + (r->sparse ? static_cast<uint64_t>(rows) * sizeof(int64_t) : 0);
      }
    }
    s->max_request_bytes_ = std::max(s->max_request_bytes_, bytes + 64 * 1024);
    if (r->mode == Receivable::Mode::kMerged && !r->sparse && !r->keep_copies) {
      ++merged_dense;
      merged_bytes += (bytes + 63) / 64 * 64;  // as BufferPool rounds its blocks
    }
    s->receivable_[name] = std::move(r);
  }
  // Room for every merged gradient's sum buffer of a step.
  s->sum_pool_ = std::make_shared<BufferPool>(std::max<size_t>(merged_dense, 16),
                                              std::max<uint64_t>(merged_bytes, uint64_t{32} << 20));
  for (size_t b = 1; b < program.NumBlocks(); ++b) {
    for (size_t i = 0; i < program.Block(b).OpSize(); ++i) {
      const OpDesc& op = program.Block(b).Op(i);
      // GEO-SGD's update: sum(X=[param, param.delta]) -> param.
      if (op.type == "sum" && !op.Input("X").empty() &&
          op.Output("Out") == std::vector<std::string>{op.Input("X")[0]}) {
        s->servable_.insert(op.Input("X")[0]);
      }
      for (const auto& p : program.Block(b).Op(i).Input("Param")) {
        const Variable* v = scope->FindVar(p);
        if (v != nullptr && v->IsType<SparseTable>()) continue;  // a distributed table: read by prefetch
        s->servable_.insert(p);
      }
    }
  }
  return s;
}

absl::Status VarStore::CheckAgainst(const VarDesc& desc, const rpc::MessageHeader& h, int trainer) const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", trainer, " sent '", h.name(), "' as ", h.Describe(), ": ", what));
  };
  const bool sparse = desc.type == proto::VarType::SELECTED_ROWS;
  if (h.kind == rpc::PayloadKind::kNone) return bad("it carries no value");
  if (sparse != (h.kind == rpc::PayloadKind::kSelectedRows) || h.kind == rpc::PayloadKind::kRawBytes) {
    return bad(absl::StrCat("the pserver receives it as ", sparse ? "SelectedRows" : "a dense tensor"));
  }
  if (h.dtype != desc.dtype) return bad(absl::StrCat("the pserver's dtype is ", DataTypeName(desc.dtype)));
  bool ok = static_cast<size_t>(h.dims.size()) == desc.shape.size();
  for (size_t i = sparse ? 1 : 0; ok && i < desc.shape.size(); ++i) {
    ok = desc.shape[i] < 0 || desc.shape[i] == h.dims[static_cast<int>(i)];
  }
  if (!ok) {
    return bad(absl::StrCat("the pserver's shape is [", absl::StrJoin(desc.shape, ", "), "]",
                            sparse ? " (the rows may vary)" : ""));
  }
  if (sparse && !desc.shape.empty() && desc.shape[0] >= 0 && h.height != desc.shape[0]) {
    return bad(absl::StrCat("the pserver's height is ", desc.shape[0]));
  }
  return absl::OkStatus();
}

absl::StatusOr<const VarStore::Receivable*> VarStore::Admit(const rpc::MessageHeader& h, int trainer) const {
  if (auto c = copy_of_.find(h.name()); c != copy_of_.end()) {
    if (c->second.second != trainer) {
      return absl::InvalidArgumentError(
          absl::StrCat("trainer ", trainer, " sent '", h.name(), "', which belongs to trainer ", c->second.second));
    }
    OAR_RETURN_IF_ERROR(CheckAgainst(*c->second.first->desc, h, trainer));
    return c->second.first;
  }
  const auto [base, suffix] = SplitTrainerSuffix(h.name());
  auto it = receivable_.find(base);
  if (it == receivable_.end() || (suffix >= 0 && it->second->mode == Receivable::Mode::kDirect)) {
    // A name that is itself declared but not received (a parameter, an accumulator).
    const bool param = servable_.count(h.name()) > 0;
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", trainer, " sent '", h.name(), "': ",
                     param ? "that is a parameter here; trainers send gradients"
                           : absl::StrCat("this pserver receives no such variable", kPlacementHint)));
  }
  if (suffix >= 0 && suffix != trainer) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", trainer, " sent '", h.name(), "', which belongs to trainer ", suffix));
  }
  OAR_RETURN_IF_ERROR(CheckAgainst(*it->second->desc, h, trainer));
  return it->second.get();
}

absl::Status VarStore::Receive(const Receivable& r, int trainer, const rpc::IncomingMessage& msg) {
  switch (r.mode) {
    case Receivable::Mode::kDirect: {
      absl::MutexLock l(&r.mu);
      msg.DecodeInto(scope_->Var(r.name));
      r.arrived.insert(trainer);
      return absl::OkStatus();
    }
    case Receivable::Mode::kPerTrainer: {
      absl::MutexLock l(&r.mu);
      msg.DecodeInto(scope_->Var(r.copies[static_cast<size_t>(trainer)]));
      r.arrived.insert(trainer);
      return absl::OkStatus();
    }
    case Receivable::Mode::kMerged:
      if (r.keep_copies) return ReceiveCopy(r, trainer, msg);
      break;
  }
  absl::MutexLock l(&r.mu);
  if (!r.arrived.insert(trainer).second) {
    return absl::AlreadyExistsError(absl::StrCat("trainer ", trainer, " already sent '", r.name, "' this step"));
  }
  if (r.sparse) {
    Variable part;
    msg.DecodeInto(&part);
    r.sparse_parts[trainer] = std::move(*part.GetMutable<SelectedRows>());
    return absl::OkStatus();
  }
  Variable* merged = scope_->Var(r.name);
  if (r.arrived.size() == 1) {
    // The first: its buffer becomes the merged one (a read-only view of
    // the trainer's lent memory stays one; the next arrival's sum gets a
    // buffer of its own: AddPayloadInto).
    msg.DecodeInto(merged);
    return absl::OkStatus();
  }
  return msg.AddPayloadInto(merged->GetMutable<Tensor>(), sum_pool_);
}

void VarStore::ReceiveInto(const Receivable& r, const rpc::IncomingMessage& msg, Scope* local) const {
  msg.DecodeInto(local->Var(r.name));
}

int VarStore::BlockOf(const Receivable& r) const { return r.block; }
const std::string& VarStore::NameOf(const Receivable& r) const { return r.name; }

bool VarStore::Ready(const Receivable& r, const std::set<int>& completed) const {
  absl::MutexLock l(&r.mu);
  if (r.arrived.empty()) return false;                          // nothing to apply (every trainer may have completed)
  if (r.mode == Receivable::Mode::kDirect) return fanin_ == 1;  // else: the barrier decides
  for (int t = 0; t < fanin_; ++t) {
    if (completed.count(t) == 0 && r.arrived.count(t) == 0) return false;
  }
  return true;
}

absl::Status VarStore::Finalize(const Receivable& r, const std::set<int>& completed) {
  if (r.mode == Receivable::Mode::kDirect) return absl::OkStatus();
  if (r.keep_copies) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", r.name, "' is an elastic job's gradient: its step is taken among its contributors"));
  }
  const std::string& name = r.name;
  absl::MutexLock l(&r.mu);
  if (r.mode == Receivable::Mode::kPerTrainer) {
    for (int t : completed) {
      if (r.reset_done.insert(t).second) ZeroVariable(scope_->Var(r.copies[static_cast<size_t>(t)]));
    }
  }
  for (int t = 0; t < fanin_; ++t) {
    if (completed.count(t) == 0 && r.arrived.count(t) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("trainer ", t, " reached the batch barrier without sending '", name, "'"));
    }
  }
  if (r.mode != Receivable::Mode::kMerged) return absl::OkStatus();
  Variable* merged = scope_->Var(name);
  if (r.sparse) {  // rows of every trainer, in trainer order, as `sum` joins them
    SelectedRows* out = merged->GetMutable<SelectedRows>();
    out->rows.clear();
    out->height = r.desc->shape.empty() ? 0 : r.desc->shape[0];
    int64_t n = 0;
    const Tensor* first = nullptr;
    for (const auto& [t, part] : r.sparse_parts) {
      n += static_cast<int64_t>(part.rows.size());
      if (first == nullptr) first = &part.value;
    }
    if (first == nullptr) {
      ZeroVariable(merged);
      return absl::OkStatus();
    }
    DDim d = first->dims();
    d[0] = n;
    out->value.Resize(d);
    char* dst = static_cast<char*>(out->value.mutable_data(first->dtype()));
    for (const auto& [t, part] : r.sparse_parts) {
      out->rows.insert(out->rows.end(), part.rows.begin(), part.rows.end());
      if (part.value.nbytes() > 0) std::memcpy(dst, part.value.raw_data(), part.value.nbytes());
      dst += part.value.nbytes();
    }
    out->height = r.sparse_parts.begin()->second.height;
  } else if (r.arrived.empty()) {  // every trainer completed: nothing to add
    ZeroVariable(merged);
  }
  return absl::OkStatus();
}

void VarStore::Release(const Receivable& r) {
  absl::MutexLock l(&r.mu);
  r.arrived.clear();
  r.sparse_parts.clear();
  r.summed.clear();
  if (r.keep_copies) return;  // the sum's buffer is kept for the next step's
  if (r.mode == Receivable::Mode::kPerTrainer) {
    for (int t = 0; r.sparse && t < fanin_; ++t) ZeroVariable(scope_->Var(r.copies[static_cast<size_t>(t)]));
    return;
  }
  if (r.sparse) {
    ZeroVariable(scope_->Var(r.name));
  } else {
    scope_->Var(r.name)->Clear();  // the next step's first arrival allocates again
  }
}

absl::Status VarStore::BeforeOptimize(const std::set<int>& completed) {
  for (auto& [name, r] : receivable_) OAR_RETURN_IF_ERROR(Finalize(*r, completed));
  return absl::OkStatus();
}

void VarStore::AfterOptimize() {
  for (auto& [name, r] : receivable_) Release(*r);
}

std::vector<const VarStore::Receivable*> VarStore::receivables() const {
  std::vector<const Receivable*> out;
  for (const auto& [name, r] : receivable_) out.push_back(r.get());
  return out;
}

int VarStore::ReceivablesOf(int block) const {
  int n = 0;
  for (const auto& [name, r] : receivable_) n += r->block == block;
  return n;
}

absl::Status VarStore::CheckServable(const std::string& name) const {
  if (servable_.count(name)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("no parameter '", name, "' to serve (a pserver serves only the parameters",
                                          " it updates)", kPlacementHint));
}

}  // namespace oar
