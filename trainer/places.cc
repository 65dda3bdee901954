#include "trainer/places.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace oar {

std::vector<Place> CpuPlaces(int n) { return std::vector<Place>(static_cast<size_t>(n), CPUPlace()); }

absl::StatusOr<std::vector<Place>> CpuPlacesFromEnv() {
  const char* v = std::getenv("CPU_NUM");
  if (v == nullptr) {
    LOG(WARNING) << "CPU_NUM is not set; using 1 CPU place (set CPU_NUM=N to train on N places)";
    return CpuPlaces(1);
  }
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("CPU_NUM='", v, "' is not a positive number of places"));
  }
  return CpuPlaces(n);
}

}  // namespace oar
