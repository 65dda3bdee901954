#include "common/rpc/status_payloads.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace oar::rpc {
namespace {

constexpr size_t kMaxPart = 256;
constexpr absl::string_view kPrefix = "oar/";

}  // namespace

absl::Status JobStops(int failed, absl::string_view message) {
  absl::Status s = absl::FailedPreconditionError(message);
  s.SetPayload(kJobStopsUrl, absl::Cord(absl::StrCat(failed)));
  return s;
}

std::optional<int> JobStoppedBy(const absl::Status& s) {
  if (!absl::IsFailedPrecondition(s)) return std::nullopt;
  const auto v = s.GetPayload(kJobStopsUrl);  // absl::optional
  int id = -1;
  if (!v.has_value() || !absl::SimpleAtoi(std::string(*v), &id) || id < 0) return std::nullopt;
  return id;
}

// One "url\tvalue\n" line per payload: URLs and values are short text.
std::string EncodePayloads(const absl::Status& s) {
  std::string out;
  size_t n = 0;
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    const std::string v(value);
    if (n >= kMaxPayloads || !absl::StartsWith(url, kPrefix) || url.size() > kMaxPart || v.size() > kMaxPart ||
        absl::StrContains(url, '\t') || absl::StrContains(url, '\n') || absl::StrContains(v, '\n')) {
      return;
    }
    absl::StrAppend(&out, url, "\t", v, "\n");
    ++n;
  });
  return out;
}

void DecodePayloads(absl::string_view bytes, absl::Status* s) {
  if (s->ok()) return;
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(bytes, '\n', absl::SkipEmpty())) {
    if (n >= kMaxPayloads) return;
    const size_t tab = line.find('\t');
    if (tab == absl::string_view::npos) continue;
    const absl::string_view url = line.substr(0, tab), value = line.substr(tab + 1);
    if (!absl::StartsWith(url, kPrefix) || url.size() > kMaxPart || value.size() > kMaxPart) continue;
    s->SetPayload(url, absl::Cord(value));
    ++n;
  }
}

}  // namespace oar::rpc
