#include "cli/flag_parse.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/flag_refusal.h"
#include "gflags/gflags.h"

namespace oar::cli {
namespace {

// Other names of flags: --feed and --loss, as Paddle users write them for
// `oar train --program`; each stands for the flag it maps to everywhere.
const std::map<std::string, std::string>& FlagAliases() {
  static const auto* aliases = new std::map<std::string, std::string>{{"feed", "feed_names"}, {"loss", "loss_name"}};
  return *aliases;
}

// gflags' flags that read other flags from a file or the environment: left
// to gflags, which reads them once.
bool ReadsOtherFlags(const std::string& name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv";
}

// What a value of a flag's type looks like, for an error about one that is not.
std::string WhatToGive(const std::string& type) {
  if (type == "bool") return "give true or false";
  if (type == "double") return "give a number";
  if (absl::StartsWith(type, "int") || absl::StartsWith(type, "uint")) return "give a whole number";
  return "give a value";
}

// Sets flag `name` to `value`, as gflags' parser will; the error (its
// validator's reason, or what the type takes) starts with `what`.
absl::Status TrySet(const gflags::CommandLineFlagInfo& info, const std::string& value, const std::string& what) {
  if (ReadsOtherFlags(info.name)) return absl::OkStatus();
  TakeFlagRefusal();  // a refusal left from another parse is not this one's
  if (!gflags::SetCommandLineOption(info.name.c_str(), value.c_str()).empty()) return absl::OkStatus();
  std::string why = TakeFlagRefusal();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why.empty() ? WhatToGive(info.type) : why));
}

// FLAGS_<name> variables, for every flag; the command line may override them.
absl::Status ApplyEnvironment() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    const char* v = std::getenv(("FLAGS_" + f.name).c_str());
    if (v == nullptr) continue;
    absl::Status s = TrySet(f, v, absl::StrCat("FLAGS_", f.name, "='", v, "' in the environment"));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The names of the flags `cmd` reads, to suggest in place of an unknown one.
std::vector<std::string> NamesRead(const Command& cmd) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::vector<std::string> names;
  for (const auto& f : flags) {
    if (CommandReads(cmd, f.name)) names.push_back(f.name);
  }
  for (const auto& [alias, name] : FlagAliases()) {
    if (CommandReads(cmd, name)) names.push_back(alias);
  }
  return names;
}

// Tries each flag of `args` (argv in gflags' syntax, aliases resolved, from
// args[1]) as gflags' parser will read it, to fail with a clear line first.
// Stricter than gflags in one way: `--name --other` is a missing value,
// never the value "--other".
absl::Status TryArgs(const Command& cmd, const std::vector<std::string>& args) {
  const std::string see = absl::StrCat("; see 'oar ", cmd.name, " --help'");
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') continue;  // a positional argument ("-" included)
    const std::string body = a.substr(a[1] == '-' ? 2 : 1);
    if (body.empty()) break;  // "--": the rest are positional
    const size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = body.substr(eq + 1);
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      const bool negated_bool = !value && absl::StartsWith(name, "no") &&
                                gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool";
      if (!negated_bool) {
        std::string near = NearestName(name, NamesRead(cmd));
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", name, " for oar ", cmd.name,
                         near.empty() ? "" : absl::StrCat(" (did you mean --", near, "?)"), see));
      }
      value = "false";
    }
    if (!value) {
      if (info.type == "bool") {
        value = "true";
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      } else {  // gflags would take the next flag for the value
        return absl::InvalidArgumentError(
            absl::StrCat("--", info.name, " needs a value (", WhatToGive(info.type), ")",
                         i + 1 < args.size() ? absl::StrCat(" before ", args[i + 1], "; write --", info.name,
                                                            "=VALUE for a value that starts with --")
                                             : "",
                         see));
      }
    }
    absl::Status s = TrySet(info, *value, absl::StrCat("--", info.name, "=", *value));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string NearestName(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_edits = std::max<size_t>(1, name.size() / 3) + 1;
  for (const std::string& c : candidates) {
    // Edit distance with a swap of two neighbours as one edit ("trian").
    std::vector<std::vector<size_t>> d(name.size() + 1, std::vector<size_t>(c.size() + 1));
    for (size_t i = 0; i <= name.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= c.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= name.size(); ++i) {
      for (size_t j = 1; j <= c.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (name[i - 1] == c[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && name[i - 1] == c[j - 2] && name[i - 2] == c[j - 1]) {
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    const size_t edits = d[name.size()][c.size()];
    if (edits < best_edits) {
      best_edits = edits;
      best = c;
    }
  }
  return best;
}

absl::StatusOr<std::vector<std::string>> ParseCommandFlags(const Command& cmd, int argc, char** argv,
                                                           std::vector<std::string>* given) {
  if (absl::Status s = ApplyEnvironment(); !s.ok()) return s;
  // argv[0] "oar", argv[1] the command: hand gflags "oar <flags...>".
  std::vector<std::string> storage;
  storage.push_back(argv[0]);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (absl::StartsWith(a, "--") && a.size() > 2) {
      size_t eq = a.find('=');
      std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      std::string rest = eq == std::string::npos ? "" : a.substr(eq);
      name = absl::StrReplaceAll(name, {{"-", "_"}});
      if (auto alias = FlagAliases().find(name); alias != FlagAliases().end()) name = alias->second;
      a = "--" + name + rest;
      gflags::CommandLineFlagInfo info;
      if (given != nullptr) {  // --nosync names the flag sync
        given->push_back(!gflags::GetCommandLineFlagInfo(name.c_str(), &info) && absl::StartsWith(name, "no")
                             ? name.substr(2)
                             : name);
      }
    }
    storage.push_back(a);
  }
  if (absl::Status s = TryArgs(cmd, storage); !s.ok()) return s;
  std::vector<char*> ptrs;
  for (auto& s : storage) ptrs.push_back(s.data());
  int n = static_cast<int>(ptrs.size());
  char** p = ptrs.data();
  gflags::ParseCommandLineNonHelpFlags(&n, &p, /*remove_flags=*/true);
  return std::vector<std::string>(p + 1, p + n);
}

}  // namespace oar::cli
