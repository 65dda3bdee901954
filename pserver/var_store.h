// VarStore: the pserver's rules for variables — what may be received, from
// whom, into what; what may be served; what is reset — split out of
// ParameterServer, which keeps only its loops.
//
// Receiving. A trainer sends a gradient by the name the pserver program
// gives it (`fc_w@GRAD.block0`, or with its own `.trainer_<id>` suffix).
// Admit checks the message's header against the declaration — the name is
// one of listen_and_serv's grad_to_block_id, a `.trainer_<id>` suffix is the
// sender's own, dtype, dense or SelectedRows as declared, every declared
// dimension (−1 only where the program has −1), a SelectedRows' height and
// width — before a byte of its payload is copied or any memory allocated.
// Where the gradient goes:
//  - sync, several trainers, and the optimize block starts with Fluid's merge
//    (`sum(X=[g.trainer_0 .. g.trainer_{n-1}]) -> g`, usually `scale(g) -> g`;
//    a distributed table's copies are `g.trainer_<t>.pserver_<i>`):
//    streaming merge — each arriving dense gradient is added straight into
//    `g` (the first one's buffer becomes `g`'s; when it is a read-only view
//    of the memory its trainer lent, the second arrival's sum goes into a
//    pooled buffer of the store's own), so no per-trainer copy is ever held and the
//    pserver's memory does not grow with the number of trainers; sparse ones
//    are kept per trainer and joined in trainer order before the optimize
//    pass (as `sum` would). The block then runs without its `sum` op
//    (merged_blocks()); the program itself stays op for op Fluid's.
//  - sync, per-trainer copies without that pattern: `g.trainer_<id>`, as
//    Fluid stores them; a trainer that completed has its copies zeroed
//    (Fluid's ResetReceivedVars), so it stops contributing.
//  - sync, one trainer (no copies): `g` itself.
//  - sync in an elastic job: per-trainer copies always (a trainer that
//    leaves mid-step must be taken out of it: FinalizeAmong); with Fluid's
//    merge, a dense gradient's sum is made by the store from the copies
//    (SumAhead) and the block runs without its `sum`, as above.
//  - async: a variable `g` in the caller's child scope for its block.
// Sparse received variables are cleared after every optimize pass, so a
// stale sparse gradient is never applied twice.
//
// Merging rounds like `sum` for up to two trainers; with more, the sum of
// the dense gradients is taken in arrival order (as an all-reduce would), so
// it may differ from `sum`'s trainer order in the last bits.
//
// Serving: only the parameters the optimize blocks update (optimizer ops'
// `Param`), never a gradient another thread may be writing, nor a
// distributed table (trainers prefetch its rows).
//
// Thread-safety: Admit, Receive and CheckServable may be called concurrently
// (each received variable has its own lock); BeforeOptimize and
// AfterOptimize only while no Receive runs (the step barrier ensures it).
// Lock order: a receivable's lock is a leaf.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/program_desc.h"
#include "common/framework/scope.h"
#include "common/rpc/message.h"

namespace oar {

class VarStore {
 public:
  struct Receivable;

  // `program` is the pserver program, `scope` holds its persistables; both
  // outlive the store. InvalidArgument when grad_to_block_id names an
  // undeclared variable.
  static absl::StatusOr<std::unique_ptr<VarStore>> Create(const ProgramDesc& program, Scope* scope, int fanin,
                                                          bool sync_mode,
                                                          const std::map<std::string, int>& grad_to_block_id,
                                                          bool elastic = false);
  ~VarStore();

  // The receivable a gradient message fills, after checking its header.
  // InvalidArgument naming the variable, the trainer and what is wrong.
  absl::StatusOr<const Receivable*> Admit(const rpc::MessageHeader& header, int trainer) const;
  // Sync: stores (or merges) a trainer's gradient for this step.
  absl::Status Receive(const Receivable& r, int trainer, const rpc::IncomingMessage& msg);
  // Async: the gradient as `local`'s variable of its block.
  void ReceiveInto(const Receivable& r, const rpc::IncomingMessage& msg, Scope* local) const;
  // The optimize block a receivable feeds.
  int BlockOf(const Receivable& r) const;
  const std::string& NameOf(const Receivable& r) const;

  // Sync: true when every trainer not in `completed` has sent `r` this step
  // (and at least one has).
  bool Ready(const Receivable& r, const std::set<int>& completed) const;
  // Sync, before `r`'s block runs (no receive of `r` in flight): zeroes the
  // copies of trainers in `completed` (once), joins a sparse merge, and
  // checks that every other trainer sent `r` this step (FailedPrecondition
  // naming the trainer and the variable otherwise).
  absl::Status Finalize(const Receivable& r, const std::set<int>& completed);
  // Sync, after `r`'s block ran: clears this step's arrivals and sparse
  // received variables, and frees a merged gradient's buffer (the next
  // step's first arrival makes a new one), so a pserver holds merged
  // gradients only while their blocks wait (dense per-trainer copies stay
  // until the next arrival replaces them).
  void Release(const Receivable& r);
  // An elastic job's sync step (the store was created `elastic`: every
  // trainer's copy is kept, never merged as it arrives), before `r`'s block
  // runs: the program's sum over every slot, scaled by 1/fanin, is to be
  // the contributors' mean (each empty slot counts as the mean of the
  // present ones). So each contributor's copy counts times
  // fanin/|contributors| and the others not at all: in `r`'s sum, which
  // the store makes (a merged dense gradient, SumAhead), or in the copies
  // the block sums (the others zeroed). FailedPrecondition when a
  // contributor did not send `r`. `contributors` is not empty.
  absl::Status FinalizeAmong(const Receivable& r, const std::set<int>& contributors);
  // An elastic job's sync step, after a Receive of a dense `r`: once every
  // trainer in `likely` (the step's live trainers, StepBarrier::live) has
  // sent it, their mean is made now, on the receiving thread, rather than
  // at the barrier; FinalizeAmong keeps it when the contributors are
  // `likely` and makes it again from the copies otherwise. A no-op for
  // other receivables.
  void SumAhead(const Receivable& r, const std::set<int>& likely);
  // Finalize / Release for every receivable.
  absl::Status BeforeOptimize(const std::set<int>& completed);
  void AfterOptimize();
  std::vector<const Receivable*> receivables() const;
  // How many receivables feed `block`.
  int ReceivablesOf(int block) const;

  // OK when `name` is a parameter this pserver serves; NotFound otherwise.
  absl::Status CheckServable(const std::string& name) const;
  // The optimize blocks whose leading `sum` the store performs as it
  // receives: run them without their first op.
  const std::set<int>& merged_blocks() const { return merged_blocks_; }
  // The largest gradient message a trainer may send here (its header
  // included), from the declarations.
  uint64_t MaxRequestBytes() const { return max_request_bytes_; }

 private:
  VarStore(const ProgramDesc& program, Scope* scope, int fanin, bool sync);
  absl::Status CheckAgainst(const VarDesc& desc, const rpc::MessageHeader& h, int trainer) const;
  // keep_copies: the trainer's copy, kept (var_store_elastic.cc).
  absl::Status ReceiveCopy(const Receivable& r, int trainer, const rpc::IncomingMessage& msg);

  Scope* scope_;
  const int fanin_;
  std::map<std::string, std::unique_ptr<Receivable>> receivable_;     // by merged name
  std::map<std::string, std::pair<const Receivable*, int>> copy_of_;  // per-trainer name → (receivable, trainer)
  std::set<std::string> servable_;
  std::set<int> merged_blocks_;
  uint64_t max_request_bytes_ = 0;
  // Sums that cannot be made in place (the first arrival is a read-only
  // view of a trainer's lent memory) get their buffers here, warm each
  // step: room for every merged dense gradient's (set by Create).
  std::shared_ptr<BufferPool> sum_pool_;
};

}  // namespace oar
