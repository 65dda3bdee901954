#include "common/rpc/remote_prefetch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/framework/variable.h"
#include "common/rpc/rpc_client.h"

namespace oar::rpc {

absl::Status PrefetchRows(RpcClient* client, const RemoteTable& table, const std::vector<int64_t>& ids, Tensor* rows) {
  const size_t blocks = table.table_names.size();
  if (blocks == 0 || table.epmap.size() != blocks || table.height_sections.size() != blocks) {
    return absl::InvalidArgumentError(absl::StrCat("remote prefetch: ", table.table_names.size(), " table blocks (",
                                                   absl::StrJoin(table.table_names, ", "), "), ", table.epmap.size(),
                                                   " endpoints and ", table.height_sections.size(),
                                                   " height sections: one of each per block"));
  }
  std::vector<int64_t> start(blocks + 1, 0);
  for (size_t b = 0; b < blocks; ++b) start[b + 1] = start[b] + table.height_sections[b];
  // Per block: the local row of each id asked of it, and where its answer goes.
  std::vector<std::vector<int64_t>> local(blocks), slot(blocks);
  for (size_t k = 0; k < ids.size(); ++k) {
    const int64_t id = ids[k];
    if (id < 0 || id >= start[blocks]) {
      return absl::InvalidArgumentError(absl::StrCat("remote prefetch: id ", id, " is outside the table of ",
                                                     start[blocks], " rows kept as ", table.table_names[0], " ..."));
    }
    const size_t b = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), id) - start.begin()) - 1;
    local[b].push_back(id - start[b]);
    slot[b].push_back(static_cast<int64_t>(k));
  }
  std::vector<Variable> asked(blocks), got(blocks);
  std::vector<std::shared_ptr<RpcCall>> calls;
  std::vector<size_t> called;
  for (size_t b = 0; b < blocks; ++b) {
    if (local[b].empty()) continue;
    Tensor* t = asked[b].GetMutable<Tensor>();
    std::copy(local[b].begin(), local[b].end(),
              t->mutable_data<int64_t>(DDim{static_cast<int64_t>(local[b].size()), 1}));
    const std::string& name = table.table_names[b];
    calls.push_back(client->AsyncPrefetchVar(table.epmap[b], name + "@PREFETCH_IDS", name + "@PREFETCH_ROWS", &asked[b],
                                             name, &got[b], table.trainer_id));
    called.push_back(b);
  }
  OAR_RETURN_IF_ERROR(WaitAll(calls));
  int64_t width = -1;
  DataType dtype = DataType::kFloat32;
  for (size_t b : called) {
    if (!got[b].IsType<Tensor>()) {
      return absl::InternalError(
          absl::StrCat("remote prefetch: ", table.epmap[b], " sent no rows of ", table.table_names[b]));
    }
    const Tensor& r = got[b].Get<Tensor>();
    const int64_t w = r.dims().size() == 2 ? r.dims()[1] : -1;
    if (r.dims().size() != 2 || r.dims()[0] != static_cast<int64_t>(local[b].size()) || (width >= 0 && w != width)) {
      return absl::InternalError(absl::StrCat("remote prefetch: ", table.epmap[b], " sent rows ", r.dims().ToString(),
                                              " of ", table.table_names[b], " for ", local[b].size(), " ids"));
    }
    width = w;
    dtype = r.dtype();
  }
  rows->Resize(DDim{static_cast<int64_t>(ids.size()), std::max<int64_t>(width, 0)});
  char* out = static_cast<char*>(rows->mutable_data(dtype, CPUPlace()));
  const size_t row_bytes = static_cast<size_t>(std::max<int64_t>(width, 0)) * SizeOf(dtype);
  for (size_t b : called) {
    const char* src = static_cast<const char*>(got[b].Get<Tensor>().raw_data());
    for (size_t i = 0; i < slot[b].size(); ++i) {
      std::memcpy(out + static_cast<size_t>(slot[b][i]) * row_bytes, src + i * row_bytes, row_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace oar::rpc
