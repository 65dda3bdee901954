#include "common/base/job_settings.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace oar {

std::string EncodeJobSettings(const JobSettings& s) {
  return absl::StrJoin(s, " ", [](std::string* out, const std::pair<std::string, int64_t>& kv) {
    absl::StrAppend(out, kv.first, "=", kv.second);
  });
}

absl::StatusOr<JobSettings> DecodeJobSettings(const std::string& text) {
  JobSettings out;
  for (absl::string_view item : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    int64_t v = 0;
    if (eq == absl::string_view::npos || eq == 0 || !absl::SimpleAtoi(item.substr(eq + 1), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("job settings: '", item, "' is not name=integer"));
    }
    out.emplace_back(std::string(item.substr(0, eq)), v);
  }
  return out;
}

namespace {

// "--seed" for a flag's value; "files.count" (a named aspect of --files) as it is.
std::string Shown(const std::string& name) { return name.find('.') == std::string::npos ? "--" + name : name; }

// The flag a setting comes from: "--files" for "files.count".
std::string FlagOf(const std::string& name) { return "--" + name.substr(0, name.find('.')); }

}  // namespace

std::string Disagreement(const JobSettings& mine, int64_t my_trainer, const JobSettings& theirs,
                         int64_t their_trainer) {
  const std::map<std::string, int64_t> a(mine.begin(), mine.end()), b(theirs.begin(), theirs.end());
  std::vector<std::string> names;  // in `mine`'s order, then what only `theirs` has
  for (const auto& [name, v] : mine) names.push_back(name);
  for (const auto& [name, v] : theirs) {
    if (!a.count(name)) names.push_back(name);
  }
  auto said = [](const std::map<std::string, int64_t>& m, const std::string& name) {
    auto it = m.find(name);
    return it == m.end() ? absl::StrCat("no ", Shown(name)) : absl::StrCat(Shown(name), " ", it->second);
  };
  std::vector<std::string> ours, other, flags;
  for (const auto& name : names) {
    if (std::find(flags.begin(), flags.end(), FlagOf(name)) == flags.end()) flags.push_back(FlagOf(name));
    auto x = a.find(name), y = b.find(name);
    if (x != a.end() && y != b.end() && x->second == y->second) continue;
    ours.push_back(said(a, name));
    other.push_back(said(b, name));
  }
  if (ours.empty()) return "";
  return absl::StrCat("trainer ", my_trainer, " trains with ", absl::StrJoin(ours, ", "), " but trainer ",
                      their_trainer, " with ", absl::StrJoin(other, ", "), "; start every trainer with the same ",
                      absl::StrJoin(flags, ", "), " (the trainers split the data and the steps by them)");
}

}  // namespace oar
