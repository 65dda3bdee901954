#include "common/data/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace oar {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly n bytes; false on a short read.
bool ReadFully(gzFile f, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    int got = gzread(f, p, chunk);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

uint32_t BigEndian32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  // gzopen reads uncompressed files transparently too.
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid IDX file (", why, ")"));
  };
  unsigned char magic[4];
  if (!ReadFully(f.get(), magic, 4)) return bad("shorter than its 4-byte magic");
  if (magic[0] != 0 || magic[1] != 0) return bad("magic does not start with two zero bytes");
  if (magic[2] != 0x08) return bad(absl::StrCat("element type 0x", absl::Hex(magic[2]), " is not unsigned byte"));
  int rank = magic[3];
  if (rank < 1 || rank > 4) return bad(absl::StrCat("rank ", rank, " out of range"));
  IdxArray out;
  int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char d[4];
    if (!ReadFully(f.get(), d, 4)) return bad("truncated header");
    out.dims.push_back(BigEndian32(d));
    total *= out.dims.back();
    if (total > (int64_t{1} << 34)) return bad("dimensions too large");
  }
  out.data.resize(static_cast<size_t>(total));
  if (!ReadFully(f.get(), out.data.data(), out.data.size())) {
    return bad(absl::StrCat("body shorter than the ", total, " bytes its header declares"));
  }
  char extra;
  if (gzread(f.get(), &extra, 1) > 0) return bad("trailing bytes after the declared body");
  return out;
}

}  // namespace oar
