// VarStore's internals, shared by its source files (var_store.cc,
// var_store_elastic.cc): what one received gradient is, and how a variable
// is emptied. Not for other users.
//
// Thread-safety: a Receivable's per-step fields are guarded by its `mu`.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "pserver/var_store.h"

namespace oar {

struct VarStore::Receivable {
  enum class Mode { kDirect, kPerTrainer, kMerged };
  std::string name;                 // the merged gradient's name ("fc_w@GRAD.block0")
  std::vector<std::string> copies;  // kPerTrainer, kMerged: trainer t's name
  Mode mode = Mode::kDirect;
  bool sparse = false;
  // kMerged in an elastic job (dense only): every trainer's copy is kept
  // and `name` is their sum in trainer order, made once the step's likely
  // contributors all sent (SumAhead) or at the barrier (var_store_elastic.cc).
  bool keep_copies = false;
  int block = -1;
  const VarDesc* desc = nullptr;  // what a message is checked against
  // Per step (mu guards them; the loop reads them with no receive in flight).
  mutable absl::Mutex mu;
  mutable std::set<int> arrived ABSL_GUARDED_BY(mu);
  mutable std::map<int, SelectedRows> sparse_parts ABSL_GUARDED_BY(mu);  // kMerged sparse, by trainer
  mutable std::set<int> reset_done ABSL_GUARDED_BY(mu);  // kPerTrainer: departed trainers' copies zeroed
  mutable std::set<int> summed ABSL_GUARDED_BY(mu);      // keep_copies: whose copies `name` holds the sum of
};

// Zeroes a dense tensor that holds a value, or empties a SelectedRows.
void ZeroVariable(Variable* v);

}  // namespace oar
