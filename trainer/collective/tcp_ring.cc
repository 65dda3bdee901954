#include "trainer/collective/tcp_ring.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_options.h"
#include "trainer/collective/collective_op.h"
#include "trainer/collective/reduce.h"
#include "trainer/collective/ring_link.h"

namespace oar {
namespace {

// What every operation opens with; a rank checks its predecessor's.
struct Header {
  char magic[4] = {'O', 'A', 'R', 'C'};
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint16_t root = 0;
  uint64_t seq = 0;
  uint64_t count = 0;
  uint64_t name_hash = 0;
  char name[64] = {};
};
static_assert(sizeof(Header) == 96);

// One block of an AllGather.
struct BlockHeader {
  uint64_t bytes = 0;
  uint32_t ndims = 0;
  uint8_t dtype = 0;
  uint8_t pad[3] = {};
  int64_t dims[8] = {};
};
static_assert(sizeof(BlockHeader) == 80);

std::string Describe(const Header& h) {
  return absl::StrCat(CollectiveOpName(h.op), " '", std::string(h.name, strnlen(h.name, sizeof(h.name))), "' (",
                      DataTypeName(static_cast<DataType>(h.dtype)), "[", h.count, "])");
}

}  // namespace

class TcpRing::Impl {
 public:
  TcpRingOptions o;
  std::unique_ptr<RingLink> link;
  uint64_t seq = 0;
  std::vector<char> blocks;  // small all-reduces: every rank's tensor

  int n() const { return static_cast<int>(o.endpoints.size()); }
  int mod(int x) const { return ((x % n()) + n()) % n(); }

  Header Make(uint8_t op, const Tensor* t, const std::string& name, int root = 0) {
    Header h;
    h.op = op;
    h.dtype = t != nullptr ? static_cast<uint8_t>(t->dtype()) : 0;
    h.root = static_cast<uint16_t>(root);
    h.seq = ++seq;
    h.count = t != nullptr ? static_cast<uint64_t>(t->numel()) : 0;
    h.name_hash = NameHash(name);
    std::memcpy(h.name, name.data(), std::min(name.size(), sizeof(h.name) - 1));
    return h;
  }

  RingLink::HeaderFn Check(const Header& mine, const std::string& name) {
    return [this, mine, name](const char* raw) {
      Header theirs;
      std::memcpy(&theirs, raw, sizeof(theirs));
      if (std::memcmp(theirs.magic, mine.magic, 4) != 0 || theirs.op != mine.op || theirs.dtype != mine.dtype ||
          theirs.root != mine.root || theirs.seq != mine.seq || theirs.count != mine.count ||
          theirs.name_hash != mine.name_hash) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the trainers' programs disagree: rank ", o.rank, " called ", Describe(mine), " as its collective #",
            mine.seq, ", ", link->Peer(link->prev()), " called ", Describe(theirs), " as its #", theirs.seq));
      }
      return absl::OkStatus();
    };
  }

  absl::Status Fail(const absl::Status& s, uint8_t op, const std::string& name) {
    return Annotate(s, absl::StrCat(CollectiveOpName(op), " '", name, "' on rank ", o.rank));
  }

  absl::Time Deadline() const { return absl::Now() + o.timeout; }

  absl::Status SmallAllReduce(Tensor* t, const Header& h, const std::string& name) {
    const size_t bytes = t->nbytes();
    if (n() == 2) return PairAllReduce(t, h, name);
    blocks.resize(bytes * static_cast<size_t>(n()));
    if (bytes > 0) std::memcpy(blocks.data() + bytes * static_cast<size_t>(o.rank), t->raw_data(), bytes);
    char in_header[sizeof(Header)];
    for (int s = 0; s < n() - 1; ++s) {  // pass every rank's tensor around the ring
      const int send = mod(o.rank - s), recv = mod(o.rank - s - 1);
      std::vector<Piece> out;
      if (s == 0) out.push_back({reinterpret_cast<const char*>(&h), sizeof(h)});
      out.push_back({blocks.data() + bytes * static_cast<size_t>(send), bytes});
      OAR_RETURN_IF_ERROR(link->Exchange(
          out, in_header, s == 0 ? sizeof(Header) : 0, Check(h, name),
          blocks.data() + bytes * static_cast<size_t>(recv), bytes, bytes + 1,
          [](size_t, const char*, size_t) { return absl::OkStatus(); }, Deadline()));
    }
    if (bytes == 0) return absl::OkStatus();
    std::memcpy(t->raw_data(), blocks.data(), bytes);  // in rank order: the same bits everywhere
    for (int q = 1; q < n(); ++q) {
      OAR_RETURN_IF_ERROR(SumInto(t->dtype(), t->raw_data(), blocks.data() + bytes * static_cast<size_t>(q),
                                  static_cast<size_t>(t->numel())));
    }
    return absl::OkStatus();
  }

  // Two ranks: each sends its tensor straight from its memory and adds the
  // other's to it. x + y and y + x are the same bits, so both ranks agree
  // without the rank-ordered copy-out that more ranks need.
  absl::Status PairAllReduce(Tensor* t, const Header& h, const std::string& name) {
    const size_t bytes = t->nbytes();
    blocks.resize(bytes);
    char in_header[sizeof(Header)];
    const std::vector<Piece> out = {{reinterpret_cast<const char*>(&h), sizeof(h)},
                                    {static_cast<const char*>(t->raw_data()), bytes}};
    OAR_RETURN_IF_ERROR(link->Exchange(
        out, in_header, sizeof(Header), Check(h, name), blocks.data(), bytes, bytes + 1,
        [](size_t, const char*, size_t) { return absl::OkStatus(); }, Deadline()));
    if (bytes == 0) return absl::OkStatus();
    return SumInto(t->dtype(), t->raw_data(), blocks.data(), static_cast<size_t>(t->numel()));
  }

  absl::Status RingAllReduce(Tensor* t, const Header& h, const std::string& name) {
    const int64_t count = t->numel();
    const size_t es = SizeOf(t->dtype());
    char* data = static_cast<char*>(t->raw_data());
    auto lo = [&](int seg) { return static_cast<size_t>(count * seg / n()) * es; };
    auto len = [&](int seg) { return lo(seg + 1) - lo(seg); };
    char in_header[sizeof(Header)];
    // Reduce-scatter: after it, this rank holds the sum of slice r+1.
    for (int s = 0; s < n() - 1; ++s) {
      const int send = mod(o.rank - s), recv = mod(o.rank - s - 1);
      std::vector<Piece> out;
      if (s == 0) out.push_back({reinterpret_cast<const char*>(&h), sizeof(h)});
      out.push_back({data + lo(send), len(send)});
      char* into = data + lo(recv);
      OAR_RETURN_IF_ERROR(link->Exchange(
          out, in_header, s == 0 ? sizeof(Header) : 0, Check(h, name), nullptr, len(recv), o.chunk_bytes,
          [&, into](size_t at, const char* piece, size_t size) {
            return SumInto(t->dtype(), into + at, piece, size / es);
          },
          Deadline()));
    }
    // All-gather the summed slices.
    for (int s = 0; s < n() - 1; ++s) {
      const int send = mod(o.rank - s + 1), recv = mod(o.rank - s);
      OAR_RETURN_IF_ERROR(link->Exchange(
          {{data + lo(send), len(send)}}, nullptr, 0, nullptr, data + lo(recv), len(recv), o.chunk_bytes,
          [](size_t, const char*, size_t) { return absl::OkStatus(); }, Deadline()));
    }
    return absl::OkStatus();
  }
};

TcpRing::TcpRing(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpRing::~TcpRing() = default;

absl::StatusOr<std::unique_ptr<TcpRing>> TcpRing::Create(TcpRingOptions options) {
  const int n = static_cast<int>(options.endpoints.size());
  if (n < 1 || options.rank < 0 || options.rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat("ring rank ", options.rank, " is not in [0, ", n, ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) options.timeout = absl::Milliseconds(rpc::RpcOptions{}.deadline_ms);
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  OAR_ASSIGN_OR_RETURN(
      impl->link,
      RingLink::Connect(
          {.rank = options.rank, .endpoints = options.endpoints, .token = options.token, .timeout = options.timeout}));
  return std::unique_ptr<TcpRing>(new TcpRing(std::move(impl)));
}

int TcpRing::rank() const { return impl_->o.rank; }
int TcpRing::size() const { return impl_->n(); }

absl::Status TcpRing::AllReduce(Tensor* t, const std::string& name) {
  if (!Summable(t->dtype())) return SumInto(t->dtype(), nullptr, nullptr, 0);  // the error
  if (t->numel() > 0 && !t->initialized()) return absl::InvalidArgumentError(absl::StrCat("'", name, "' has no data"));
  if (size() == 1) return absl::OkStatus();
  const Header h = impl_->Make(kAllReduce, t, name);
  // Two ranks move the same bytes either way, and gathering takes one
  // exchange where the ring takes two: gather up to pair_bytes.
  const size_t small = size() == 2 ? std::max(impl_->o.small_bytes, impl_->o.pair_bytes) : impl_->o.small_bytes;
  absl::Status s =
      t->nbytes() < small || t->numel() < size() ? impl_->SmallAllReduce(t, h, name) : impl_->RingAllReduce(t, h, name);
  return s.ok() ? s : impl_->Fail(s, kAllReduce, name);
}

absl::Status TcpRing::Broadcast(Tensor* t, int root, const std::string& name) {
  if (root < 0 || root >= size())
    return absl::InvalidArgumentError(absl::StrCat("Broadcast root ", root, " is not a rank"));
  if (size() == 1) return absl::OkStatus();
  Impl& m = *impl_;
  const Header h = m.Make(kBroadcast, t, name, root);
  char in_header[sizeof(Header)];
  const bool is_root = m.o.rank == root, last = m.link->next() == root;
  char* data = static_cast<char*>(t->raw_data());
  std::vector<Piece> out = {{reinterpret_cast<const char*>(&h), sizeof(h)}};
  if (is_root) out.push_back({data, t->nbytes()});
  absl::Status s = m.link->Exchange(
      out, in_header, sizeof(Header), m.Check(h, name), is_root ? nullptr : data, is_root ? 0 : t->nbytes(),
      m.o.chunk_bytes,
      [&](size_t at, const char* piece, size_t size) {
        if (!last) m.link->QueueWrite(piece, size);  // onward, as it lands
        return absl::OkStatus();
      },
      m.Deadline());
  return s.ok() ? s : m.Fail(s, kBroadcast, name);
}

absl::Status TcpRing::AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) {
  Impl& m = *impl_;
  const int n = size();
  out->assign(static_cast<size_t>(n), Tensor());
  (*out)[static_cast<size_t>(m.o.rank)].CopyFrom(in);
  if (in.dims().size() > 8) return absl::InvalidArgumentError("AllGather: tensors of rank > 8");
  if (n == 1) return absl::OkStatus();
  Header h = m.Make(kAllGather, nullptr, name);
  h.dtype = static_cast<uint8_t>(in.dtype());
  for (int s = 0; s < n - 1; ++s) {
    const int send = m.mod(m.o.rank - s), recv = m.mod(m.o.rank - s - 1);
    const Tensor& block = (*out)[static_cast<size_t>(send)];
    BlockHeader bh, theirs;
    bh.bytes = block.nbytes();
    bh.ndims = static_cast<uint32_t>(block.dims().size());
    bh.dtype = static_cast<uint8_t>(block.dtype());
    for (int d = 0; d < block.dims().size(); ++d) bh.dims[d] = block.dims()[d];
    // The block's shape first (and, in the first step, the operation's header).
    std::vector<Piece> first;
    if (s == 0) first.push_back({reinterpret_cast<const char*>(&h), sizeof(h)});
    first.push_back({reinterpret_cast<const char*>(&bh), sizeof(bh)});
    char raw[sizeof(Header) + sizeof(BlockHeader)];
    const size_t hl = (s == 0 ? sizeof(Header) : 0) + sizeof(BlockHeader);
    absl::Status st = m.link->Exchange(
        first, raw, hl,
        [&](const char* got) {
          if (s == 0) OAR_RETURN_IF_ERROR(m.Check(h, name)(got));
          std::memcpy(&theirs, got + (s == 0 ? sizeof(Header) : 0), sizeof(theirs));
          DDim dims;
          for (uint32_t d = 0; d < std::min<uint32_t>(theirs.ndims, 8); ++d) dims.push_back(theirs.dims[d]);
          auto bytes = static_cast<uint64_t>(dims.numel()) * SizeOf(in.dtype());
          if (theirs.ndims > 8 || dims.HasUnknown() || theirs.dtype != h.dtype || bytes != theirs.bytes) {
            return absl::InvalidArgumentError(absl::StrCat(m.link->Peer(m.link->prev()), " sent a malformed block"));
          }
          return absl::OkStatus();
        },
        nullptr, 0, 1, nullptr, m.Deadline());
    if (!st.ok()) return m.Fail(st, kAllGather, name);
    Tensor& dst = (*out)[static_cast<size_t>(recv)];
    DDim dims;
    for (uint32_t d = 0; d < theirs.ndims; ++d) dims.push_back(theirs.dims[d]);
    dst.Resize(dims);
    char* into = static_cast<char*>(dst.mutable_data(in.dtype()));
    st = m.link->Exchange(
        {{static_cast<const char*>(block.raw_data()), block.nbytes()}}, nullptr, 0, nullptr, into, dst.nbytes(),
        m.o.chunk_bytes, [](size_t, const char*, size_t) { return absl::OkStatus(); }, m.Deadline());
    if (!st.ok()) return m.Fail(st, kAllGather, name);
  }
  return absl::OkStatus();
}

absl::Status TcpRing::Barrier() {
  if (size() == 1) return absl::OkStatus();
  Tensor one;
  one.mutable_data<int32_t>({1})[0] = 1;
  const Header h = impl_->Make(kBarrier, &one, "barrier");
  absl::Status s = impl_->SmallAllReduce(&one, h, "barrier");
  return s.ok() ? s : impl_->Fail(s, kBarrier, "barrier");
}

}  // namespace oar
