// ParallelExecutor::Compiled: a prepared step for one (feeds, fetches) pair —
// a prepared block per place and the step's SSA graph. Private to
// parallel_executor*.cc.
//
// Thread-safety: built once, then read by the step's handles.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/framework/prepared_block.h"
#include "trainer/parallel_executor.h"
#include "trainer/ssa_graph.h"

namespace oar {

struct ParallelExecutor::Compiled {
  std::vector<std::string> feed_names;
  std::vector<std::unique_ptr<PreparedBlock>> blocks;  // one per place
  SsaGraph graph;
};

}  // namespace oar
