#include "transpiler/ps_dispatcher.h"

namespace oar {

std::vector<std::string> RoundRobin::Dispatch(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    out.push_back(endpoints_[step_]);
    step_ = (step_ + 1) % endpoints_.size();
  }
  return out;
}

uint64_t StableHash(const std::string& s) {
  uint64_t h = 14695981039346656037ull;  // FNV offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<std::string> HashName::Dispatch(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) out.push_back(endpoints_[StableHash(n) % endpoints_.size()]);
  return out;
}

}  // namespace oar
