// JobSettings: the settings every trainer of one job must share because the
// trainers split the work by them — the global batch, the shuffle's seed,
// the examples used, the epochs, the step cap — as (flag name, value)
// pairs. Trainers started with different ones train, but not the job a
// single process would: their shards overlap or leave examples out, their
// gradients are means over other batch sizes, one stops before the others.
// A job compares them once, at its start (the pservers in pserver mode,
// VariableMessage.oar_job_settings; the trainers among themselves in nccl2
// mode), and a mismatch is an error naming each setting that differs, with
// both values and both trainer ids. A name is a flag's ("seed": --seed)
// or a named aspect of one ("files.count", "files.names": of --files),
// for what a process derives from a flag rather than takes as it is.
//
//   JobSettings s = {{"batch_size", 128}, {"seed", 3}};
//   s.Encode()                         // "batch_size=128 seed=3"
//   Disagreement(s, 1, theirs, 0)      // "" when equal
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace oar {

using JobSettings = std::vector<std::pair<std::string, int64_t>>;

// "name=value name=value"
std::string EncodeJobSettings(const JobSettings& s);
// Its inverse; InvalidArgument for text that is not name=integer pairs.
absl::StatusOr<JobSettings> DecodeJobSettings(const std::string& text);

// "" when `mine` and `theirs` hold the same values; else "trainer 1 trains
// with --seed 4, --limit 100 but trainer 0 with --seed 3, --limit 0; start
// every trainer with the same --batch_size, --seed, ..." (a setting one
// side lacks counts as differing; the advice names each flag once).
std::string Disagreement(const JobSettings& mine, int64_t my_trainer, const JobSettings& theirs, int64_t their_trainer);

}  // namespace oar
