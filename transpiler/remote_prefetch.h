// Fluid 1.5+'s remote_prefetch tables in pserver mode: a parameter with a
// sparse gradient that a lookup_table (or lookup_table_v2) with
// remote_prefetch and not is_distributed reads stays whole on the pservers,
// sliced into blocks like any parameter, but the trainer does not receive
// it each step: the lookups get the blocks' epmap, table_names,
// height_sections and trainer_id and read only the rows they need (the
// trainer's startup still receives it once). As Fluid 1.5's
// _update_remote_sparse_update_op.
//
// nce and hierarchical_sigmoid, which Fluid 1.5 treats the same, keep
// receiving their weights: Fluid's nce_grad computes Input@GRAD from the
// trainer's local Weight, which under remote prefetch is the stale startup
// copy — a wrong gradient Oar does not reproduce.
//
// Thread-safety: externally synchronized (edits the transpiler's state).
#pragma once

#include "transpiler/transpile_state.h"

namespace oar {

// Marks each such SplitParam and sets the attributes on its lookups; call
// once the blocks have endpoints, before the recvs are appended.
void MarkRemotePrefetchTables(TranspileState* s);

}  // namespace oar
