// The command line of `oar <command>`: FLAGS_* environment variables, then
// argv, in gflags' syntax (--name=value, --name value, --name and --noname
// for booleans, -name, and -- to end the flags), with --dashed-names for
// --underscored_names and Paddle's --feed/--loss aliases. Every flag is
// tried before gflags parses the line, so a mistake ends the run with one
// line a person can act on: an unknown flag with the nearest name the
// command reads, a flag missing its value, or a value the flag's type or
// validator refuses, with the validator's reason (common/base/flag_refusal.h).
//
// Thread-safety: used from main() only, before other threads start.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/command.h"

namespace oar::cli {

// Parses argv (argv[0] = "oar", argv[1] = the command). Returns the
// positional arguments, or InvalidArgument naming the first flag that is
// unknown, lacks its value or has a value it refuses (from the environment
// as FLAGS_<name>, or on the command line). `given` (if not null) gets the
// names of the flags given on the command line (--nosync: "sync").
absl::StatusOr<std::vector<std::string>> ParseCommandFlags(const Command& cmd, int argc, char** argv,
                                                           std::vector<std::string>* given = nullptr);

// Of `candidates`, the one nearest `name` in edits (insert, delete or
// change one letter, or swap two neighbours), if it is near enough to be a likely typo (at most a
// third of its letters, and at least one, differ); else "".
std::string NearestName(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace oar::cli
