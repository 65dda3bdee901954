// The subcommand plumbing of the `oar` binary. Each subcommand lives in its
// own cli/<name>_cmd.cc, defines its gflags there, and registers a Command.
// `oar <cmd> --help` lists exactly the flags defined in that file (plus the
// shared ones in command.cc). Flags may also come from the environment as
// FLAGS_<name>=value (Fluid's habit); the command line wins (cli/flag_parse.h).
//
// Thread-safety: used from main() only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

struct Command {
  std::string name;
  std::string summary;                    // one line, for `oar --help`
  std::string usage;                      // "oar train [flags]"
  std::string flags_file;                 // source file whose flags belong to this command
  std::vector<std::string> shared_flags;  // flags defined elsewhere that it also takes
  // Runs with the positional arguments left after flag parsing; returns the
  // process exit code.
  int (*run)(const std::vector<std::string>& args) = nullptr;
  std::map<std::string, std::string> flag_help = {};  // what a shared flag means for this command, where it differs
  // Source files or folders whose flags it also reads ("/cli/rpc_flags.cc": the rpc flags).
  std::vector<std::string> flag_dirs = {};
};

const std::vector<Command>& Commands();

// Prints "usage" plus the command's flags with their help and defaults.
void PrintCommandHelp(const Command& cmd);

const Command* FindCommand(const std::string& name);
// True when `cmd` reads flag `name`: defined in its file, shared with it,
// from one of its flag_dirs, or one of glog's and gflags' own.
bool CommandReads(const Command& cmd, const std::string& name);
// InvalidArgument naming the first of `given` that `cmd` does not read (a
// flag that would be silently ignored), and where it belongs.
absl::Status CheckFlagsRead(const Command& cmd, const std::vector<std::string>& given);

// True when flag `name` was given (on the command line or as FLAGS_<name>),
// not left at its default.
bool FlagGiven(const char* name);

// Prints "oar: error: <message>" to stderr and returns 1.
int Fail(const std::string& message);

// Runs `body` for a command that takes no positional arguments: 0 on
// success, else Fail with its message.
int RunWithoutArgs(const std::string& command, const std::vector<std::string>& args, absl::Status (*body)());

// Whole-file I/O with errors that name the path.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
absl::Status WriteFileBytes(const std::string& path, const std::string& bytes);

}  // namespace oar::cli
