#include "trainer/feed_split.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace oar {

namespace {

// The [begin, end) row ranges of each part (sequence boundaries with LoD).
std::vector<std::pair<int64_t, int64_t>> Parts(const Tensor& t, size_t places) {
  const bool has_lod = !t.lod().empty();
  const int64_t samples = has_lod ? static_cast<int64_t>(t.lod()[0].size()) - 1 : t.dims()[0];
  const int64_t each = samples / static_cast<int64_t>(places);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t p = 0; p < places; ++p) {
    int64_t b = each * static_cast<int64_t>(p);
    int64_t e = p + 1 == places ? samples : b + each;
    if (has_lod) {
      b = static_cast<int64_t>(t.lod()[0][b]);
      e = static_cast<int64_t>(t.lod()[0][e]);
    }
    out.emplace_back(b, e);
  }
  return out;
}

Tensor Part(const Tensor& t, int64_t b, int64_t e, size_t place, size_t places) {
  Tensor part = t.Slice(b, e);
  if (!t.lod().empty()) {  // rebase the first level's offsets (deeper levels are not supported)
    const auto& l0 = t.lod()[0];
    const int64_t samples = static_cast<int64_t>(l0.size()) - 1;
    const int64_t each = samples / static_cast<int64_t>(places);
    const int64_t first = each * static_cast<int64_t>(place);
    const int64_t last = place + 1 == places ? samples : first + each;
    std::vector<size_t> level;
    for (int64_t i = first; i <= last; ++i) level.push_back(l0[i] - l0[first]);
    part.set_lod({level});
  }
  return part;
}

}  // namespace

absl::StatusOr<std::vector<FeedMap>> SplitFeed(const FeedMap& feed, size_t places) {
  std::vector<FeedMap> out(places);
  for (const auto& [name, t] : feed) {
    if (!t.initialized() || t.dims().size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' holds no data to split"));
    }
    if (t.lod().size() > 1) {
      return absl::UnimplementedError(absl::StrCat("feed '", name, "': splitting a LoD of more than one level"));
    }
    const int64_t samples = t.lod().empty() ? t.dims()[0] : static_cast<int64_t>(t.lod()[0].size()) - 1;
    if (samples < static_cast<int64_t>(places)) {
      return absl::InvalidArgumentError(absl::StrCat("feed '", name, "' has ", samples, " samples, fewer than the ",
                                                     places, " places it must be split across"));
    }
    auto parts = Parts(t, places);
    for (size_t p = 0; p < places; ++p) out[p][name] = Part(t, parts[p].first, parts[p].second, p, places);
  }
  return out;
}

absl::Status CheckFeedList(const std::vector<FeedMap>& feeds, size_t places) {
  if (feeds.size() != places) {
    return absl::InvalidArgumentError(
        absl::StrCat("a list feed needs one entry per place: got ", feeds.size(), " for ", places, " places"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> MergeFetched(const std::vector<std::vector<Tensor>>& fetched) {
  if (fetched.empty()) return std::vector<Tensor>{};
  std::vector<Tensor> out;
  for (size_t i = 0; i < fetched[0].size(); ++i) {
    DDim d = fetched[0][i].dims();
    int64_t rows = 0;
    // Checked before any byte is copied: every place's tensor holds data of
    // place 0's dtype and the same shape past dim 0.
    for (size_t p = 0; p < fetched.size(); ++p) {
      const auto& f = fetched[p];
      bool same =
          i < f.size() && f[i].initialized() && f[i].dtype() == fetched[0][i].dtype() && f[i].dims().size() == d.size();
      for (int k = 1; same && k < d.size(); ++k) same = f[i].dims()[k] == d[k];
      if (!same) {
        return absl::InternalError(absl::StrCat(
            "fetch #", i, ": place ", p, " returned ",
            i < f.size() && f[i].initialized() ? DataTypeName(f[i].dtype()) + f[i].dims().ToString() : "nothing",
            ", place 0 ", DataTypeName(fetched[0][i].dtype()), d.ToString()));
      }
      rows += d.size() ? f[i].dims()[0] : 1;
    }
    if (d.size() == 0) d = DDim{1};
    d[0] = rows;
    Tensor merged;
    merged.Resize(d);
    char* dst = static_cast<char*>(merged.mutable_data(fetched[0][i].dtype()));
    for (const auto& f : fetched) {
      std::memcpy(dst, f[i].raw_data(), f[i].nbytes());
      dst += f[i].nbytes();
    }
    out.push_back(std::move(merged));
  }
  return out;
}

}  // namespace oar
