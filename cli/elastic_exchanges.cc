#include "cli/elastic_exchanges.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar::cli {

absl::Status FlushChunk(Communicator* communicator, GeoCommunicator* geo, int64_t chunk) {
  if (communicator != nullptr) {
    OAR_RETURN_IF_ERROR(Annotate(communicator->Flush(), absl::StrCat("the communicator's sends of chunk ", chunk)));
  }
  if (geo != nullptr) {
    OAR_RETURN_IF_ERROR(Annotate(geo->Flush(), absl::StrCat("GEO-SGD's exchange at the end of chunk ", chunk)));
  }
  return absl::OkStatus();
}

std::function<int()> GeoTrainersNow(const ElasticJob& job) {
  return [&job] { return std::max(1, static_cast<int>(TrainersOf(job).live.size())); };
}

}  // namespace oar::cli
