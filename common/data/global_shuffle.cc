// GlobalShuffle; see global_shuffle.h.
//
// Thread-safety: a blocking call.
#include "common/data/global_shuffle.h"

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar {

absl::StatusOr<std::vector<std::string>> GlobalShuffle(std::vector<std::string> records, uint64_t seed,
                                                       const ShuffleGroup& group) {
  if (group.size <= 1) return records;
  if (group.rank < 0 || group.rank >= group.size || !group.all_gather) {
    return absl::InvalidArgumentError(absl::StrCat("global shuffle: rank ", group.rank, " of ", group.size));
  }
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(group.rank));
  std::vector<std::vector<size_t>> to(static_cast<size_t>(group.size));
  for (size_t i = 0; i < records.size(); ++i) to[rng() % static_cast<uint64_t>(group.size)].push_back(i);
  std::vector<std::string> mine;
  for (int d = 0; d < group.size; ++d) {
    size_t bytes = 0;
    for (size_t i : to[static_cast<size_t>(d)]) bytes += records[i].size() + 1;
    Tensor out;
    out.Resize(DDim{static_cast<int64_t>(bytes)});
    char* p = static_cast<char*>(out.mutable_data(DataType::kUInt8));
    for (size_t i : to[static_cast<size_t>(d)]) {
      std::memcpy(p, records[i].data(), records[i].size());
      p += records[i].size();
      *p++ = '\n';
      std::string().swap(records[i]);  // sent: free it
    }
    std::vector<Tensor> gathered;
    OAR_RETURN_IF_ERROR(
        Annotate(group.all_gather(out, &gathered), absl::StrCat("global shuffle, records for trainer ", d)));
    if (d != group.rank) continue;
    for (const Tensor& t : gathered) {
      const char* b = static_cast<const char*>(t.raw_data());
      const char* e = b + t.numel();
      while (b < e) {
        const char* nl = static_cast<const char*>(std::memchr(b, '\n', static_cast<size_t>(e - b)));
        if (nl == nullptr) return absl::DataLossError("global shuffle: a record without its end arrived");
        mine.emplace_back(b, nl);
        b = nl + 1;
      }
    }
  }
  return mine;
}

}  // namespace oar
