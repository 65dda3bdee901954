#include "transpiler/ps_dispatcher.h"

#include "absl/strings/numbers.h"

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
  for (const auto& n : names) {
    // "fc_w.block2" → variable "fc_w", block 2; any other name is block 0.
    std::string var = n;
    uint64_t block = 0;  // a suffix too long for uint64 leaves the name whole
    const size_t dot = n.rfind(".block");
    if (dot != std::string::npos && absl::SimpleAtoi(n.substr(dot + 6), &block) &&
        n.find_first_not_of("0123456789", dot + 6) == std::string::npos) {
      var = n.substr(0, dot);
    } else {
      block = 0;
    }
    out.push_back(endpoints_[(StableHash(var) + block) % endpoints_.size()]);
  }
  return out;
}

}  // namespace oar
