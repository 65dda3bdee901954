// The trainer's side of Fluid 1.5+'s remote_prefetch tables: the rows a
// lookup needs, fetched from the pservers that keep the table as row blocks
// (RemoteTable, common/framework/run_env.h). Each id goes to the block whose rows it
// falls in, as a row index local to that block; each pserver gets one
// PrefetchVariable call with its ids (table_name = the block's variable) and
// answers with their rows, which are put back in the order asked.
//
// Thread-safety: safe for concurrent calls (RpcClient is).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/run_env.h"
#include "common/framework/tensor.h"

namespace oar::rpc {

class RpcClient;

// rows = [ids.size(), width] of the table's rows ids; InvalidArgument naming
// the id and the table when an id is outside it, the pserver's error (with
// its endpoint) when a call fails.
absl::Status PrefetchRows(RpcClient* client, const RemoteTable& table, const std::vector<int64_t>& ids, Tensor* rows);

}  // namespace oar::rpc
