// CommunicatorAdvice: what a trainer says before its communicator starts
// when the program does not suit it. A recv context that pulls an
// `is_sparse` embedding's table whole (the table is kept on every trainer,
// not `is_distributed`) and is large moves the whole table on every pull:
// the recv thread falls many steps behind, and the trainer keeps sending
// gradients computed on the same stale rows (docs/parameter-server.md:
// ctr_dnn's 40 MB table trained to AUC 0.50 with the communicator, 0.61
// without). Each warning names the table and its size and says what to do.
//
//   for (const std::string& w : CommunicatorAdvice(program, contexts)) LOG(WARNING) << w;
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/framework/program_desc.h"
#include "trainer/communicator_context.h"

namespace oar {

// Tables pulled whole of at least `min_bytes` (16 MiB by default).
std::vector<std::string> CommunicatorAdvice(const ProgramDesc& trainer_program, const CommunicatorContexts& contexts,
                                            int64_t min_bytes = int64_t{16} << 20);

}  // namespace oar
