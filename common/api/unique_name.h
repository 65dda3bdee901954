// Fluid's unique_name: "fc" → "fc_0", "fc_1", ...; "fc_0.tmp" → "fc_0.tmp_0".
// One generator per thread; UniqueNameGuard swaps in a fresh one for a scope
// (building a second model with the same names, or a test).
//
//   std::string n = unique_name::Generate("fc");   // "fc_0"
//   { UniqueNameGuard g; unique_name::Generate("fc"); }  // "fc_0" again
//
// Thread-safety: thread-local state; no sharing between threads.
#pragma once

#include <map>
#include <string>

namespace oar {
namespace unique_name {

// Returns `key` + "_" + the number of earlier calls with `key`.
std::string Generate(const std::string& key);

}  // namespace unique_name

class UniqueNameGuard {
 public:
  UniqueNameGuard();
  ~UniqueNameGuard();
  UniqueNameGuard(const UniqueNameGuard&) = delete;
  UniqueNameGuard& operator=(const UniqueNameGuard&) = delete;

 private:
  std::map<std::string, int> saved_;
};

}  // namespace oar
