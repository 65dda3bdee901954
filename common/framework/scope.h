// Scope: a name → Variable map with a parent chain. Persistable variables
// (parameters, optimizer state) live in a long-lived global scope; each run's
// temporaries live in a child ("local") scope that is dropped afterwards.
//
//   Scope global;
//   Scope& local = global.NewScope();
//   local.Var("tmp")->GetMutable<Tensor>();
//   global.DeleteScope(&local);
//
// Thread-safety: safe for concurrent use. Variables handed out are not
// themselves synchronized; a Variable* stays valid until its scope is dropped.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/variable.h"

namespace oar {

class Scope {
 public:
  Scope() = default;
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Creates a child scope owned by this one.
  Scope& NewScope() const;
  // Destroys a child created by NewScope (no-op for a stranger).
  void DeleteScope(Scope* kid) const;
  // Destroys all children.
  void DropKids() const;

  // Finds `name` in this scope only, creating it when absent.
  Variable* Var(const std::string& name);
  // Finds `name` here or in an ancestor; nullptr if nowhere.
  Variable* FindVar(absl::string_view name) const;
  // Finds `name` in this scope only; nullptr if absent.
  Variable* FindLocalVar(absl::string_view name) const;
  // Gives local variable `from` the name `to` (replacing a local `to`);
  // false when `from` is not local here.
  bool Rename(const std::string& from, const std::string& to);
  // Removes `names` from this scope (those absent are ignored).
  void EraseVars(const std::vector<std::string>& names);

  std::vector<std::string> LocalVarNames() const;
  const Scope* parent() const { return parent_; }

  // A token that expires when this scope is destroyed, for objects (such as
  // an Executor's cache) that remember a scope they do not own.
  std::weak_ptr<const Scope* const> LivenessToken() const { return self_; }

 private:
  const Scope* parent_ = nullptr;
  std::shared_ptr<const Scope* const> self_ = std::make_shared<const Scope* const>(this);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Variable>> vars_ ABSL_GUARDED_BY(mu_);
  mutable std::list<std::unique_ptr<Scope>> kids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar
