// .npy and .npz reading; see npy.h. The .npy header is a Python dict
// literal with three keys ('descr', 'fortran_order', 'shape'); it is read
// by looking each key up, not by a general Python parser.
//
// Thread-safety: stateless functions.
#include "common/data/npy.h"

#include <zip.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"

namespace oar {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

absl::Status Bad(const std::string& what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

// The value after `'key':` in the header dict, up to the next top-level
// comma or the closing brace ("(3, 4)" kept whole).
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key, const std::string& what) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return Bad(what, absl::StrCat("the .npy header has no ", quoted, ": ", header));
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) return Bad(what, absl::StrCat("the .npy header does not parse: ", header));
  size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return std::string(absl::StripAsciiWhitespace(header.substr(at + 1, end - at - 1)));
}

absl::StatusOr<DataType> DtypeOf(std::string descr, const std::string& what) {
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'') {
    return Bad(what, absl::StrCat("the .npy 'descr' is ", descr, ", not a simple dtype (a structured array?)"));
  }
  descr = descr.substr(1, descr.size() - 2);
  const char order = descr[0];
  const std::string kind = descr.substr(1);
  const bool one_byte = kind == "i1" || kind == "u1" || kind == "b1";
  if (order == '>' && !one_byte) {
    return Bad(what,
               absl::StrCat("dtype '", descr, "' is big-endian; save it little-endian (arr.astype('<", kind, "'))"));
  }
  if (order != '<' && order != '|' && order != '=') return Bad(what, absl::StrCat("dtype '", descr, "' is not read"));
  static const std::map<std::string, DataType> kKinds = {
      {"f2", DataType::kFloat16}, {"f4", DataType::kFloat32}, {"f8", DataType::kFloat64},
      {"i1", DataType::kInt8},    {"i2", DataType::kInt16},   {"i4", DataType::kInt32},
      {"i8", DataType::kInt64},   {"u1", DataType::kUInt8},   {"b1", DataType::kBool}};
  const auto it = kKinds.find(kind);
  if (it == kKinds.end()) {
    return Bad(what, absl::StrCat("dtype '", descr,
                                  "' has no Oar type (float16/32/64, int8/16/32/64, uint8, bool); "
                                  "convert it with arr.astype(...)"));
  }
  return it->second;
}

absl::StatusOr<DDim> ShapeOf(const std::string& text, const std::string& what) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return Bad(what, absl::StrCat("the .npy 'shape' is ", text, ", not a tuple"));
  }
  DDim dims;
  for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;  // "(5,)"
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0)
      return Bad(what, absl::StrCat("the .npy 'shape' ", text, " does not parse"));
    dims.push_back(d);
  }
  return dims;
}

// C-order copy of a Fortran-order array of `elem`-byte elements.
void FortranToC(const char* src, const DDim& dims, size_t elem, char* dst) {
  const int rank = dims.size();
  std::vector<int64_t> fstride(static_cast<size_t>(rank), 1), idx(static_cast<size_t>(rank), 0);
  for (int i = 1; i < rank; ++i) fstride[i] = fstride[i - 1] * dims[i - 1];
  const int64_t n = dims.numel();
  for (int64_t e = 0; e < n; ++e) {  // e walks C order; idx is its multi-index
    int64_t f = 0;
    for (int i = 0; i < rank; ++i) f += idx[i] * fstride[i];
    std::memcpy(dst + e * elem, src + f * elem, elem);
    for (int i = rank - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
}

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    return Bad(what, "not an .npy file (no \\x93NUMPY magic; write it with numpy.save)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(what, "truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    at = 12;
  } else {
    return Bad(what, absl::StrCat(".npy format version ", major, " is not read (1, 2 and 3 are)"));
  }
  if (bytes.size() < at + header_len) return Bad(what, "truncated .npy header");
  const absl::string_view header = bytes.substr(at, header_len);
  OAR_ASSIGN_OR_RETURN(std::string descr, DictValue(header, "descr", what));
  OAR_ASSIGN_OR_RETURN(std::string fortran, DictValue(header, "fortran_order", what));
  OAR_ASSIGN_OR_RETURN(std::string shape, DictValue(header, "shape", what));
  OAR_ASSIGN_OR_RETURN(const DataType dtype, DtypeOf(descr, what));
  OAR_ASSIGN_OR_RETURN(const DDim dims, ShapeOf(shape, what));
  if (fortran != "True" && fortran != "False") return Bad(what, absl::StrCat("'fortran_order' is ", fortran));
  const absl::string_view data = bytes.substr(at + header_len);
  const size_t want = static_cast<size_t>(dims.numel()) * SizeOf(dtype);
  if (data.size() != want) {
    return Bad(what, absl::StrCat("holds ", data.size(), " bytes of data; shape ", dims.ToString(), " of ",
                                  DataTypeName(dtype), " is ", want, data.size() < want ? " (truncated)" : ""));
  }
  Tensor t;
  t.Resize(dims);
  char* dst = static_cast<char*>(t.mutable_data(dtype));
  if (fortran == "True" && dims.size() > 1) {
    FortranToC(data.data(), dims, SizeOf(dtype), dst);
  } else if (want > 0) {
    std::memcpy(dst, data.data(), want);
  }
  return t;
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return ParseNpy(bytes.str(), path);
}

absl::Status WriteNpy(const std::string& path, const Tensor& t) {
  static const std::map<DataType, std::string> kDescr = {
      {DataType::kFloat16, "<f2"}, {DataType::kFloat32, "<f4"}, {DataType::kFloat64, "<f8"},
      {DataType::kInt8, "|i1"},    {DataType::kInt16, "<i2"},   {DataType::kInt32, "<i4"},
      {DataType::kInt64, "<i8"},   {DataType::kUInt8, "|u1"},   {DataType::kBool, "|b1"}};
  const auto it = kDescr.find(t.dtype());
  if (it == kDescr.end())
    return absl::InvalidArgumentError(absl::StrCat(path, ": no .npy dtype for ", DataTypeName(t.dtype())));
  std::string shape = "(";
  for (int i = 0; i < t.dims().size(); ++i)
    absl::StrAppend(&shape, t.dims()[i], t.dims().size() == 1 ? "," : (i + 1 < t.dims().size() ? ", " : ""));
  shape += ")";
  std::string header = absl::StrCat("{'descr': '", it->second, "', 'fortran_order': False, 'shape': ", shape, ", }");
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::NotFoundError(absl::StrCat(path, ": cannot write"));
  out.write(kMagic.data(), static_cast<std::streamsize>(kMagic.size()));
  const char version[2] = {1, 0};
  const char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(version, 2).write(len, 2).write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.numel() * SizeOf(t.dtype())));
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, Tensor>> ReadNpz(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, int (*)(zip_t*)> archive(zip_open(path.c_str(), ZIP_RDONLY, &err), zip_close);
  if (archive == nullptr) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    const std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable .npz (", why, ")"));
  }
  std::map<std::string, Tensor> arrays;
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) continue;
    const std::string name = st.name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".npy") continue;
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(
        zip_fopen_index(archive.get(), static_cast<zip_uint64_t>(i), 0), zip_fclose);
    const std::string what = absl::StrCat(path, "[", name, "]");
    if (file == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot open the member"));
    std::string bytes(static_cast<size_t>(st.size), '\0');
    if (zip_fread(file.get(), bytes.data(), st.size) != static_cast<zip_int64_t>(st.size)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read the member (corrupt archive?)"));
    }
    OAR_ASSIGN_OR_RETURN(Tensor t, ParseNpy(bytes, what));
    arrays[name.substr(0, name.size() - 4)] = std::move(t);
  }
  if (arrays.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no .npy arrays in the archive"));
  return arrays;
}

}  // namespace oar
