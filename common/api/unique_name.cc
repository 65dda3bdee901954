#include "common/api/unique_name.h"

#include "absl/strings/str_cat.h"

namespace oar {
namespace {
thread_local std::map<std::string, int> counters;
}  // namespace

namespace unique_name {
std::string Generate(const std::string& key) { return absl::StrCat(key, "_", counters[key]++); }
}  // namespace unique_name

UniqueNameGuard::UniqueNameGuard() { saved_.swap(counters); }
UniqueNameGuard::~UniqueNameGuard() { saved_.swap(counters); }

}  // namespace oar
