// The DistributeTranspiler's distributed lookup table (a lookup_table with
// is_distributed): found in the origin program, rewritten on the trainer
// (prefetch of its rows, its gradient split by id and sent), and laid out on
// each pserver (the table's shard, its optimize, prefetch and checkpoint
// blocks) as Fluid 1.6 does; see distributed_table.cc.
//
// Thread-safety: edits the TranspileState; externally synchronized.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transpiler/transpile_state.h"

namespace oar {

// Sets state->table when the program distributes a table (after
// state->optimize_ops is known); InvalidArgument when it distributes two,
// mixes distributed and local lookups of one table, or updates it with an
// optimizer other than sgd, adagrad and adam.
absl::Status FindDistributedTable(TranspileState* state);
// The table's send control variable (a send_barrier dependency), made
// after the other sends' as Fluid numbers them.
void DeclareTableSendOut(TranspileState* state);
// Replaces the lookups of `table` in `block` with split_ids → prefetch →
// merge_ids (from `pservers`), recording the variables in *record.
absl::Status ReplaceLookupsWithPrefetch(BlockDesc* block, const std::string& table,
                                        const std::vector<std::string>& pservers, int trainer_id,
                                        DistributedTable* record);
// The trainer program's prefetch and gradient send (no-op without a table).
absl::Status TranspileTableTrainer(TranspileState* state);

struct TableBlocks {
  int32_t optimize_block = -1;
  int32_t checkpoint_block = -1;
  std::string grad_to_block_id;                            // "table@GRAD:<block>"
  std::vector<std::string> prefetch_var_name_to_block_id;  // "prefetch_compress_in_tmp_<i>:<block>"
};
// Appends the table's blocks for pserver `endpoint` (children of `parent`)
// and declares its variables in block 0.
absl::Status BuildTableBlocks(const TranspileState& state, const std::string& endpoint, int32_t parent,
                              ProgramDesc* program, TableBlocks* out);

}  // namespace oar
