#include "trainer/communicator_advice.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/framework/data_type.h"

namespace oar {
namespace {

// The tables of block 0's sparse lookups that the trainer keeps itself (a
// lookup that prefetches its rows from the pservers is not one).
std::set<std::string> SparseLookupTables(const BlockDesc& block) {
  std::set<std::string> tables;
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    if (op.type != "lookup_table" && op.type != "lookup_table_v2") continue;
    if (!op.GetAttr<bool>("is_sparse", false) || op.GetAttr<bool>("remote_prefetch", false) ||
        op.GetAttr<bool>("is_distributed", false)) {
      continue;
    }
    for (const std::string& w : op.Input("W")) tables.insert(w);
  }
  return tables;
}

}  // namespace

std::vector<std::string> CommunicatorAdvice(const ProgramDesc& trainer_program, const CommunicatorContexts& contexts,
                                            int64_t min_bytes) {
  std::vector<std::string> out;
  const BlockDesc& block = trainer_program.Block(0);
  const std::set<std::string> tables = SparseLookupTables(block);
  for (const auto& [name, c] : contexts.recv) {
    if (!tables.count(name)) continue;
    const VarDesc* var = block.FindVar(name);
    if (var == nullptr || var->shape.empty()) continue;
    int64_t bytes = static_cast<int64_t>(SizeOf(var->dtype));
    for (int64_t d : var->shape) bytes *= d > 0 ? d : 0;
    if (bytes < min_bytes) continue;
    out.push_back(absl::StrFormat(
        "the communicator pulls the embedding table '%s' (%s, %.1f MB) whole from %d pserver block(s) on every "
        "receive: its recv thread falls behind the training, which then sends gradients computed on stale rows "
        "(an async CTR job can train to chance). Make the table distributed (is_distributed=True: only the rows "
        "a batch looks up travel), or train it without the communicator (no --runtime_split_send_recv)",
        name, absl::StrJoin(var->shape, " x "), static_cast<double>(bytes) / 1e6, static_cast<int>(c.blocks.size())));
  }
  return out;
}

}  // namespace oar
