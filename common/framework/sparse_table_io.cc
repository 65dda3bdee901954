#include "common/framework/sparse_table_io.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/framework/tensor_io.h"

namespace oar {
namespace {
constexpr uint64_t kMaxRows = uint64_t{1} << 36;
}  // namespace

absl::Status WriteSparseTable(const SparseTable& table, std::ostream& out) {
  std::vector<int64_t> ids;
  table.ForEach([&](int64_t id, const float*) { ids.push_back(id); });
  const int64_t width = table.width();
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, ids.size());
  out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(int64_t)));
  Put<int64_t>(out, table.declared_height());
  WriteTensorHeader(DataType::kFloat32, DDim{static_cast<int64_t>(ids.size()), width}, out);
  size_t written = 0;
  table.ForEach([&](int64_t, const float* row) {
    if (written++ < ids.size()) {
      out.write(reinterpret_cast<const char*>(row), static_cast<std::streamsize>(width * sizeof(float)));
    }
  });
  if (written < ids.size()) return absl::DataLossError("sparse table: rows vanished while saving");
  if (!out) return absl::DataLossError("write failed");
  return absl::OkStatus();
}

absl::Status ReadSparseTable(std::istream& in, const std::string& what, SparseTable* table) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a SelectedRows record (", why, ")"));
  };
  uint32_t version;
  uint64_t n;
  if (!Get(in, &version) || version != 0) return bad("bad version");
  if (!Get(in, &n) || n > kMaxRows) return bad("bad row count");
  std::vector<int64_t> ids(n);
  if (!in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(n * sizeof(int64_t)))) {
    return bad("truncated rows");
  }
  int64_t height;
  if (!Get(in, &height)) return bad("truncated height");
  DataType dtype;
  DDim dims;
  OAR_RETURN_IF_ERROR(ReadTensorHeader(in, what, "SelectedRows", &dtype, &dims));
  if (dtype != DataType::kFloat32 || dims.size() != 2 || dims[0] != static_cast<int64_t>(n)) {
    return bad("the values are not an fp32 [rows, width] tensor");
  }
  if (table->width() != 0 && dims[1] != table->width()) {
    return bad(absl::StrCat("width ", dims[1], ", the table's is ", table->width()));
  }
  if (absl::Status s = table->Configure(dims[1]); !s.ok()) return bad(std::string(s.message()));
  std::vector<float> values(n * static_cast<uint64_t>(dims[1]));
  if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)))) {
    return bad("truncated values");
  }
  table->set_declared_height(height);
  absl::Status s = table->Assign(ids, values.data());
  return s.ok() ? s : bad(std::string(s.message()));
}

}  // namespace oar
