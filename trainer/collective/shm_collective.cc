#include "trainer/collective/shm_collective.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "trainer/collective/collective_op.h"
#include "trainer/collective/reduce.h"

namespace oar {

struct ShmCollective::Header {
  uint64_t seq;
  uint64_t name_hash;  // of the whole name (`name` may be cut short)
  uint64_t count;      // elements (AllGather: this rank's bytes)
  uint8_t op;
  uint8_t dtype;
  uint16_t root;
  uint32_t ndims;  // AllGather: this rank's shape
  int64_t dims[8];
  char name[96];
};

namespace {

constexpr size_t kAlign = 64;
size_t Aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
// A piece summed whole by every rank after one barrier, below this.
constexpr size_t kSmallBytes = 16 << 10;

}  // namespace

size_t ShmCollective::SegmentBytes(int n, size_t slot_bytes) {
  return Aligned(ShmBarrier::Bytes(n)) + 2 * Aligned(sizeof(Header) * static_cast<size_t>(n)) +
         2 * static_cast<size_t>(n) * Aligned(slot_bytes);
}

void ShmCollective::Init(char* segment, int n, uint64_t nonce) { ShmBarrier::Init(segment, n, nonce); }

absl::StatusOr<std::unique_ptr<ShmCollective>> ShmCollective::Create(std::unique_ptr<ShmSegment> segment,
                                                                     uint64_t nonce, ShmRankOptions options,
                                                                     size_t slot_bytes) {
  const int n = static_cast<int>(options.endpoints.size());
  if (n < 1 || options.rank < 0 || options.rank >= n || slot_bytes < 64 || slot_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm collective: rank ", options.rank, " of ", n, ", slots of ", slot_bytes, " bytes"));
  }
  if (segment->size() != SegmentBytes(n, slot_bytes)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the shared segment has ", segment->size(), " bytes, not ", SegmentBytes(n, slot_bytes)));
  }
  OAR_RETURN_IF_ERROR(ShmBarrier::Check(segment->data(), n, nonce));
  return std::unique_ptr<ShmCollective>(new ShmCollective(std::move(segment), std::move(options), slot_bytes));
}

ShmCollective::ShmCollective(std::unique_ptr<ShmSegment> segment, ShmRankOptions options, size_t slot_bytes)
    : segment_(std::move(segment)), barrier_(segment_->data(), std::move(options)), slot_bytes_(slot_bytes) {}

ShmCollective::Header* ShmCollective::HeaderAt(int parity, int rank) const {
  const size_t n = static_cast<size_t>(size());
  char* headers =
      segment_->data() + Aligned(ShmBarrier::Bytes(size())) + static_cast<size_t>(parity) * Aligned(sizeof(Header) * n);
  return reinterpret_cast<Header*>(headers) + rank;
}

char* ShmCollective::Slot(int parity, int rank) const {
  const size_t n = static_cast<size_t>(size());
  char* slots = segment_->data() + Aligned(ShmBarrier::Bytes(size())) + 2 * Aligned(sizeof(Header) * n);
  return slots + (static_cast<size_t>(parity) * n + static_cast<size_t>(rank)) * Aligned(slot_bytes_);
}

int ShmCollective::BeginRound(const Header* first) {
  const int parity = static_cast<int>(round_++ & 1);
  if (first != nullptr) *HeaderAt(parity, rank()) = *first;
  return parity;
}

absl::Status ShmCollective::CheckHeaders(int parity) const {
  const Header& zero = *HeaderAt(parity, 0);
  auto describe = [](const Header& h) {
    return absl::StrCat(CollectiveOpName(h.op), " '", std::string(h.name, strnlen(h.name, sizeof(h.name))), "' (",
                        DataTypeName(static_cast<DataType>(h.dtype)),
                        h.op == kAllGather ? "" : absl::StrCat("[", h.count, "]"), ")");
  };
  for (int q = 1; q < size(); ++q) {
    const Header& h = *HeaderAt(parity, q);
    const bool same = h.op == zero.op && h.dtype == zero.dtype && h.root == zero.root && h.seq == zero.seq &&
                      (h.op == kAllGather || h.count == zero.count) && h.name_hash == zero.name_hash;
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat("the trainers' programs disagree: ", barrier_.Peer(0), " called ",
                                                     describe(zero), " as its collective #", zero.seq, ", ",
                                                     barrier_.Peer(q), " called ", describe(h), " as its #", h.seq));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCollective::Fail(const absl::Status& s, const char* what, const std::string& name) {
  const absl::Status told = Annotate(s, absl::StrCat(what, " '", name, "' on rank ", rank()));
  // Every rank's wait ends (the first break's reason stands): a local error
  // too, so that the others do not wait for this rank until their deadline.
  if (size() > 1) barrier_.Break(told);
  return told;
}

namespace {

ShmCollective::Header MakeHeader(uint8_t op, uint64_t seq, DataType dtype, uint64_t count, int root,
                                 const std::string& name) {
  ShmCollective::Header h{};
  h.seq = seq;
  h.count = count;
  h.op = op;
  h.dtype = static_cast<uint8_t>(dtype);
  h.root = static_cast<uint16_t>(root);
  h.name_hash = NameHash(name);
  std::memcpy(h.name, name.data(), std::min(name.size(), sizeof(h.name) - 1));
  return h;
}

}  // namespace

absl::Status ShmCollective::AllReduce(Tensor* t, const std::string& name) {
  if (!Summable(t->dtype())) return Fail(SumInto(t->dtype(), nullptr, nullptr, 0), "AllReduce", name);
  if (t->numel() < 0 || (t->numel() > 0 && !t->initialized())) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("'", name, "' has no data")), "AllReduce", name);
  }
  return AllReduceSpans({{static_cast<char*>(t->raw_data()), t->numel()}}, t->dtype(), name);
}

absl::Status ShmCollective::AllReduceBucket(const std::vector<Tensor*>& bucket, const std::string& name) {
  std::vector<Span> spans;
  for (Tensor* t : bucket) {
    if (t->dtype() != bucket[0]->dtype() || !t->place().is_cpu() || t->numel() < 0 ||
        (t->numel() > 0 && !t->initialized())) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("tensor ", spans.size(), " is ", DataTypeName(t->dtype()),
                                                          " on ", t->place().ToString(),
                                                          ", not a host tensor of the first's dtype with data")),
                  "AllReduce", name);
    }
    spans.push_back({static_cast<char*>(t->raw_data()), t->numel()});
  }
  if (bucket.empty()) return absl::OkStatus();
  if (!Summable(bucket[0]->dtype())) return Fail(SumInto(bucket[0]->dtype(), nullptr, nullptr, 0), "AllReduce", name);
  return AllReduceSpans(spans, bucket[0]->dtype(), name);
}

namespace {

// Calls fn(piece, at, count) for the parts of `spans` that hold elements
// [lo, lo + len) of their concatenation: `piece` points at the first of
// `count` elements, `at` is its offset from lo.
template <typename Fn>
absl::Status ForPieces(const std::vector<ShmCollective::Span>& spans, size_t es, int64_t lo, int64_t len, Fn fn) {
  int64_t start = 0;
  for (const ShmCollective::Span& s : spans) {
    const int64_t a = std::max(lo, start), b = std::min(lo + len, start + s.count);
    if (a < b) OAR_RETURN_IF_ERROR(fn(s.data + (a - start) * static_cast<int64_t>(es), a - lo, b - a));
    start += s.count;
    if (start >= lo + len) break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ShmCollective::AllReduceSpans(const std::vector<Span>& spans, DataType dt, const std::string& name) {
  if (size() == 1) return absl::OkStatus();
  if (absl::Status b = barrier_.Broken(); !b.ok()) return Fail(b, "AllReduce", name);
  const size_t es = SizeOf(dt);
  const int n = size(), me = rank();
  int64_t total = 0;
  for (const Span& s : spans) total += s.count;
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(slot_bytes_ / es));
  const Header h = MakeHeader(kAllReduce, ++seq_, dt, static_cast<uint64_t>(total), 0, name);
  int64_t lo = 0;
  for (bool first = true; first || lo < total; first = false) {
    const int64_t len = std::min(per, total - lo);
    const int p = BeginRound(first ? &h : nullptr);
    auto at = [&](int q, int64_t offset) { return Slot(p, q) + offset * static_cast<int64_t>(es); };
    OAR_RETURN_IF_ERROR(ForPieces(spans, es, lo, len, [&](char* piece, int64_t off, int64_t k) {
      std::memcpy(at(me, off), piece, static_cast<size_t>(k) * es);
      return absl::OkStatus();
    }));
    absl::Status s = barrier_.Wait("AllReduce", name);
    if (s.ok() && first) s = CheckHeaders(p);
    if (!s.ok()) return Fail(s, "AllReduce", name);
    if (static_cast<size_t>(len) * es < kSmallBytes) {
      // Every rank sums the whole piece in rank order: the same bits everywhere.
      absl::Status summed = ForPieces(spans, es, lo, len, [&](char* piece, int64_t off, int64_t k) {
        std::memcpy(piece, at(0, off), static_cast<size_t>(k) * es);
        for (int q = 1; q < n; ++q) OAR_RETURN_IF_ERROR(SumInto(dt, piece, at(q, off), static_cast<size_t>(k)));
        return absl::OkStatus();
      });
      if (!summed.ok()) return Fail(summed, "AllReduce", name);
    } else {
      // Slice r of the piece is rank r's to sum, into its own slot (its own
      // values, then the others' in rank order).
      auto cut = [&](int r) { return len * r / n; };
      for (int q = 0; q < n; ++q) {
        if (q == me) continue;
        const absl::Status added =
            SumInto(dt, at(me, cut(me)), at(q, cut(me)), static_cast<size_t>(cut(me + 1) - cut(me)));
        if (!added.ok()) return Fail(added, "AllReduce", name);
      }
      s = barrier_.Wait("AllReduce", name);
      if (!s.ok()) return Fail(s, "AllReduce", name);
      for (int q = 0; q < n; ++q) {
        OAR_RETURN_IF_ERROR(
            ForPieces(spans, es, lo + cut(q), cut(q + 1) - cut(q), [&](char* piece, int64_t off, int64_t k) {
              std::memcpy(piece, at(q, cut(q) + off), static_cast<size_t>(k) * es);
              return absl::OkStatus();
            }));
      }
    }
    lo += len;
  }
  return absl::OkStatus();
}

absl::Status ShmCollective::Broadcast(Tensor* t, int root, const std::string& name) {
  if (root < 0 || root >= size()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("root ", root, " is not a rank")), "Broadcast", name);
  }
  if (size() == 1) return absl::OkStatus();
  if (absl::Status b = barrier_.Broken(); !b.ok()) return Fail(b, "Broadcast", name);
  const size_t total = t->nbytes();
  char* data = static_cast<char*>(t->raw_data());
  const Header h = MakeHeader(kBroadcast, ++seq_, t->dtype(), static_cast<uint64_t>(t->numel()), root, name);
  size_t at = 0;
  for (bool first = true; first || at < total; first = false) {
    const size_t len = std::min(slot_bytes_, total - at);
    const int p = BeginRound(first ? &h : nullptr);
    if (rank() == root && len > 0) std::memcpy(Slot(p, root), data + at, len);
    absl::Status s = barrier_.Wait("Broadcast", name);
    if (s.ok() && first) s = CheckHeaders(p);
    if (!s.ok()) return Fail(s, "Broadcast", name);
    if (rank() != root && len > 0) std::memcpy(data + at, Slot(p, root), len);
    at += len;
  }
  return absl::OkStatus();
}

absl::Status ShmCollective::AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) {
  const int n = size(), me = rank();
  out->assign(static_cast<size_t>(n), Tensor());
  (*out)[static_cast<size_t>(me)].CopyFrom(in);
  if (in.dims().size() > 8 || in.dims().HasUnknown()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("a tensor of shape ", in.dims().ToString(),
                                                        " (rank 8 at most, every dimension known)")),
                "AllGather", name);
  }
  if (n == 1) return absl::OkStatus();
  if (absl::Status b = barrier_.Broken(); !b.ok()) return Fail(b, "AllGather", name);
  const DataType dt = in.dtype();
  const char* mine = static_cast<const char*>(in.raw_data());
  Header h = MakeHeader(kAllGather, ++seq_, dt, in.nbytes(), 0, name);
  h.ndims = static_cast<uint32_t>(in.dims().size());
  for (int d = 0; d < in.dims().size(); ++d) h.dims[d] = in.dims()[d];
  size_t longest = 0, at = 0;
  for (bool first = true; first || at < longest; first = false) {
    const int p = BeginRound(first ? &h : nullptr);
    if (at < in.nbytes()) std::memcpy(Slot(p, me), mine + at, std::min(slot_bytes_, in.nbytes() - at));
    absl::Status s = barrier_.Wait("AllGather", name);
    if (s.ok() && first) s = CheckHeaders(p);
    for (int q = 0; s.ok() && first && q < n; ++q) {  // every rank's shape, checked before anything is allocated
      const Header& theirs = *HeaderAt(p, q);
      DDim dims;
      uint64_t bytes = SizeOf(dt);
      bool overflow = false;
      for (uint32_t d = 0; d < std::min<uint32_t>(theirs.ndims, 8); ++d) {
        dims.push_back(theirs.dims[d]);
        overflow |= theirs.dims[d] < 0 ||
                    __builtin_mul_overflow(bytes, static_cast<uint64_t>(std::max<int64_t>(theirs.dims[d], 0)), &bytes);
      }
      if (theirs.ndims > 8 || overflow || bytes != theirs.count) {
        s = absl::InvalidArgumentError(absl::StrCat(barrier_.Peer(q), " sent a malformed block header"));
      } else if (q != me) {
        (*out)[static_cast<size_t>(q)].Resize(dims);
        (*out)[static_cast<size_t>(q)].mutable_data(dt);
      }
      longest = std::max<size_t>(longest, theirs.count);
    }
    if (!s.ok()) return Fail(s, "AllGather", name);
    for (int q = 0; q < n; ++q) {
      Tensor& dst = (*out)[static_cast<size_t>(q)];
      if (q != me && at < dst.nbytes()) {
        std::memcpy(static_cast<char*>(dst.raw_data()) + at, Slot(p, q), std::min(slot_bytes_, dst.nbytes() - at));
      }
    }
    at += slot_bytes_;
  }
  return absl::OkStatus();
}

absl::Status ShmCollective::Barrier() {
  if (size() == 1) return absl::OkStatus();
  if (absl::Status b = barrier_.Broken(); !b.ok()) return Fail(b, "Barrier", "barrier");
  const Header h = MakeHeader(kBarrier, ++seq_, DataType::kInt32, 0, 0, "barrier");
  const int p = BeginRound(&h);
  absl::Status s = barrier_.Wait("Barrier", "barrier");
  if (s.ok()) s = CheckHeaders(p);
  return s.ok() ? s : Fail(s, "Barrier", "barrier");
}

}  // namespace oar
