#include "common/framework/scope.h"

#include <algorithm>

namespace oar {

Scope::~Scope() { DropKids(); }

Scope& Scope::NewScope() const {
  auto kid = std::make_unique<Scope>();
  kid->parent_ = this;
  Scope* raw = kid.get();
  absl::MutexLock lock(&mu_);
  kids_.push_back(std::move(kid));
  return *raw;
}

void Scope::DeleteScope(Scope* kid) const {
  std::unique_ptr<Scope> doomed;
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find_if(kids_.begin(), kids_.end(), [kid](const auto& k) { return k.get() == kid; });
    if (it == kids_.end()) return;
    doomed = std::move(*it);
    kids_.erase(it);
  }
}

void Scope::DropKids() const {
  std::list<std::unique_ptr<Scope>> doomed;
  absl::MutexLock lock(&mu_);
  doomed.swap(kids_);
}

Variable* Scope::Var(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto& slot = vars_[name];
  if (slot == nullptr) slot = std::make_unique<Variable>();
  return slot.get();
}

Variable* Scope::FindLocalVar(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

Variable* Scope::FindVar(absl::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    if (Variable* v = s->FindLocalVar(name)) return v;
  }
  return nullptr;
}

bool Scope::Rename(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  auto it = vars_.find(from);
  if (it == vars_.end()) return false;
  std::unique_ptr<Variable> v = std::move(it->second);
  vars_.erase(it);
  vars_[to] = std::move(v);
  return true;
}

void Scope::EraseVars(const std::vector<std::string>& names) {
  absl::MutexLock lock(&mu_);
  for (const auto& n : names) vars_.erase(n);
}

std::vector<std::string> Scope::LocalVarNames() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& [k, v] : vars_) names.push_back(k);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace oar
