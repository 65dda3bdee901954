#include "trainer/places.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace oar {

std::vector<Place> CpuPlaces(int n) { return std::vector<Place>(static_cast<size_t>(n), CPUPlace()); }

absl::Status CheckPlacesFitBatch(int64_t places, int64_t batch, const std::string& what) {
  if (places <= batch) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " asks for ", places, " places, more than the ", batch,
                                                 " example(s) of a batch it must be split across; use at most ", batch,
                                                 " places, or a larger --batch_size"));
}

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
