#include "trainer/geo_communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"

namespace oar {
namespace {

absl::StatusOr<Tensor*> Float32Param(Scope* scope, const std::string& name) {
  Variable* v = scope->FindVar(name);
  if (v == nullptr || !v->IsType<Tensor>() || !v->Get<Tensor>().initialized()) {
    return absl::FailedPreconditionError(absl::StrCat("GEO-SGD: parameter '", name, "' has no value in the scope"));
  }
  Tensor* t = v->GetMutable<Tensor>();
  if (t->dtype() != DataType::kFloat32) {
    return absl::UnimplementedError(
        absl::StrCat("GEO-SGD: parameter '", name, "' is ", DataTypeName(t->dtype()), "; only float32 is exchanged"));
  }
  return t;
}

// Elements per row of a [rows, ...] tensor.
int64_t RowWidth(const Tensor& t) { return t.dims().size() > 0 && t.dims()[0] > 0 ? t.numel() / t.dims()[0] : 0; }

absl::Status CheckBlock(const GeoParam& p, size_t b, const Variable& got, int64_t width) {
  const Tensor* z = got.IsType<Tensor>() ? &got.Get<Tensor>() : nullptr;
  if (z == nullptr || z->dtype() != DataType::kFloat32 || z->dims().size() == 0 || z->dims()[0] != p.rows[b] ||
      RowWidth(*z) != width) {
    return absl::InvalidArgumentError(absl::StrCat("GEO-SGD: block '", p.blocks[b], "' from ", p.epmap[b], " is not ",
                                                   p.rows[b], " float32 rows of ", width));
  }
  return absl::OkStatus();
}

}  // namespace

GeoCommunicator::GeoCommunicator(std::vector<GeoParam> params, rpc::RpcClient* client, GeoOptions options)
    : params_(std::move(params)), client_(client), options_(std::move(options)) {}

absl::Status GeoCommunicator::Start(Scope* scope) {
  absl::MutexLock lock(&mu_);
  scope_ = scope;
  for (const GeoParam& p : params_) {
    OAR_ASSIGN_OR_RETURN(Tensor * t, Float32Param(scope, p.name));
    int64_t rows = 0;
    for (int64_t r : p.rows) rows += r;
    if (t->dims().size() == 0 || t->dims()[0] != rows) {
      return absl::InvalidArgumentError(absl::StrCat("GEO-SGD: parameter '", p.name, "' ", t->dims().ToString(),
                                                     " does not have the ", rows, " rows of its blocks"));
    }
    old_[p.name].CopyFrom(*t);
  }
  return absl::OkStatus();
}

absl::Status GeoCommunicator::Step(const std::map<std::string, const Tensor*>& ids) {
  absl::MutexLock lock(&mu_);
  if (scope_ == nullptr) return absl::FailedPreconditionError("GEO-SGD: a step before Start");
  for (const auto& [table, t] : ids) {
    if (t == nullptr || !t->initialized()) continue;
    if (t->dtype() != DataType::kInt64) {
      return absl::InvalidArgumentError(absl::StrCat("GEO-SGD: the ids of table '", table, "' are not int64"));
    }
    auto& set = touched_[table];
    set.insert(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  ++steps_;
  if (steps_ % options_.need_push_nums != 0) return absl::OkStatus();
  return Exchange();
}

absl::Status GeoCommunicator::Flush() {
  absl::MutexLock lock(&mu_);
  if (scope_ == nullptr || steps_ == exchanged_at_) return absl::OkStatus();
  return Exchange();
}

int64_t GeoCommunicator::exchanges() const {
  absl::MutexLock lock(&mu_);
  return exchanges_;
}

absl::Status GeoCommunicator::Exchange() {
  const int trainers = options_.trainers_now ? std::max(1, options_.trainers_now()) : options_.trainers;
  const float scale = 1.0f / static_cast<float>(trainers);
  for (const GeoParam& p : params_) {
    OAR_ASSIGN_OR_RETURN(Tensor * train, Float32Param(scope_, p.name));
    Tensor& old = old_[p.name];
    if (!(train->dims() == old.dims())) {
      return absl::FailedPreconditionError(absl::StrCat("GEO-SGD: parameter '", p.name, "' changed shape to ",
                                                        train->dims().ToString(), " since the snapshot"));
    }
    OAR_RETURN_IF_ERROR(p.sparse ? ExchangeSparse(p, train, &old, scale) : ExchangeDense(p, train, &old, scale));
  }
  touched_.clear();
  exchanged_at_ = steps_;
  ++exchanges_;
  return absl::OkStatus();
}

absl::Status GeoCommunicator::ExchangeDense(const GeoParam& p, Tensor* train, Tensor* old, float scale) {
  Tensor delta;
  float* d = delta.mutable_data<float>(train->dims());
  float* o = old->data<float>();
  const float* t = train->data<float>();
  for (int64_t i = 0; i < train->numel(); ++i) {
    d[i] = (t[i] - o[i]) * scale;
    o[i] += d[i];
  }
  std::vector<Variable> parts(p.blocks.size()), got(p.blocks.size());
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  int64_t begin = 0;
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    *parts[b].GetMutable<Tensor>() = delta.Slice(begin, begin + p.rows[b]);
    begin += p.rows[b];
    const std::string name = p.blocks[b] + ".delta";
    if (options_.on_delta) options_.on_delta(name, parts[b]);
    calls.push_back(client_->AsyncSendVar(p.epmap[b], name, &parts[b], {.trainer_id = p.trainer_id}));
  }
  OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), absl::StrCat("GEO-SGD: sending the delta of '", p.name, "'")));
  calls.clear();
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    calls.push_back(client_->AsyncGetVar(p.epmap[b], p.blocks[b], &got[b], p.trainer_id, /*no_barrier=*/true));
  }
  OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), absl::StrCat("GEO-SGD: pulling '", p.name, "'")));
  const int64_t width = RowWidth(*train);
  float* tr = train->data<float>();
  begin = 0;
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    OAR_RETURN_IF_ERROR(CheckBlock(p, b, got[b], width));
    const float* z = got[b].Get<Tensor>().data<float>();
    const int64_t first = begin * width, n = p.rows[b] * width;
    for (int64_t i = 0; i < n; ++i) {
      tr[first + i] += z[i] - o[first + i];
      o[first + i] = z[i];
    }
    begin += p.rows[b];
  }
  return absl::OkStatus();
}

absl::Status GeoCommunicator::ExchangeSparse(const GeoParam& p, Tensor* train, Tensor* old, float scale) {
  const auto it = touched_.find(p.name);
  if (it == touched_.end() || it->second.empty()) return absl::OkStatus();
  const int64_t width = RowWidth(*train);
  float* tr = train->data<float>();
  float* o = old->data<float>();
  std::vector<Variable> deltas(p.blocks.size()), got(p.blocks.size());
  std::vector<std::vector<int64_t>> ids(p.blocks.size());  // global rows, per block
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  int64_t begin = 0;
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    const int64_t end = begin + p.rows[b];
    for (auto id = it->second.lower_bound(begin); id != it->second.end() && *id < end; ++id) ids[b].push_back(*id);
    if (!ids[b].empty()) {
      SelectedRows* sr = deltas[b].GetMutable<SelectedRows>();
      sr->height = p.rows[b];
      float* d = sr->value.mutable_data<float>(DDim{static_cast<int64_t>(ids[b].size()), width});
      for (size_t k = 0; k < ids[b].size(); ++k) {
        const int64_t row = ids[b][k];
        sr->rows.push_back(row - begin);
        for (int64_t j = 0; j < width; ++j) {
          float& dv = d[static_cast<int64_t>(k) * width + j];
          dv = (tr[row * width + j] - o[row * width + j]) * scale;
          o[row * width + j] += dv;
        }
      }
      const std::string name = p.blocks[b] + ".delta";
      if (options_.on_delta) options_.on_delta(name, deltas[b]);
      calls.push_back(client_->AsyncSendVar(p.epmap[b], name, &deltas[b], {.trainer_id = p.trainer_id}));
    }
    begin = end;
  }
  OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), absl::StrCat("GEO-SGD: sending the rows of '", p.name, "'")));
  // Only the touched rows come back, as Fluid pulls them: the pserver's
  // PrefetchVariable of a parameter block named as the table (its rows of
  // `local`, in that order).
  calls.clear();
  std::vector<Variable> local(p.blocks.size());
  begin = 0;
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    if (!ids[b].empty()) {
      int64_t* l = local[b].GetMutable<Tensor>()->mutable_data<int64_t>(DDim{static_cast<int64_t>(ids[b].size()), 1});
      for (size_t k = 0; k < ids[b].size(); ++k) l[k] = ids[b][k] - begin;
      calls.push_back(client_->AsyncPrefetchVar(p.epmap[b], p.blocks[b] + ".rows", p.blocks[b], &local[b], p.blocks[b],
                                                &got[b], p.trainer_id));
    }
    begin += p.rows[b];
  }
  OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), absl::StrCat("GEO-SGD: pulling the rows of '", p.name, "'")));
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    if (ids[b].empty()) continue;
    const Tensor* z = got[b].IsType<Tensor>() ? &got[b].Get<Tensor>() : nullptr;
    if (z == nullptr || z->dtype() != DataType::kFloat32 ||
        z->dims() != DDim{static_cast<int64_t>(ids[b].size()), width}) {
      return absl::InvalidArgumentError(absl::StrCat("GEO-SGD: ", p.epmap[b], " answered the ", ids[b].size(),
                                                     " rows of '", p.blocks[b], "' with ",
                                                     z == nullptr ? "no tensor" : z->dims().ToString()));
    }
    const float* zr = z->data<float>();
    for (size_t k = 0; k < ids[b].size(); ++k) {
      const int64_t row = ids[b][k];
      for (int64_t j = 0; j < width; ++j) {
        const int64_t at = row * width + j;
        const float v = zr[static_cast<int64_t>(k) * width + j];
        tr[at] += v - o[at];
        o[at] = v;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace oar
