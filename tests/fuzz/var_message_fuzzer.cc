// Fuzz target: a received sendrecv.VariableMessage, as the gRPC server and
// client hand one to ParseMessage, split over several gRPC slices where the
// input says so. Whatever the bytes, parsing returns a status; a message
// that parses has a header whose sizes add up, so copying its payload and
// decoding it into a variable stay inside the bytes that arrived (ASan
// checks that). The first input byte chooses the slice cuts.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/framework/selected_rows.h"
#include "common/framework/variable.h"
#include "common/rpc/var_serde.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t cuts = data[0];
  ++data;
  --size;
  // Up to three cuts at positions derived from the first byte.
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (int k = 0; k < 3 && at < size; ++k) {
    const size_t len = ((cuts >> (2 * k)) & 3) == 0 ? size - at : (size - at) / (((cuts >> (2 * k)) & 3) + 1);
    if (len == 0) break;
    slices.emplace_back(data + at, len);
    at += len;
  }
  if (at < size) slices.emplace_back(data + at, size - at);
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  auto msg = oar::rpc::ParseMessage(buffer);
  if (!msg.ok()) return 0;
  const oar::rpc::MessageHeader& h = (*msg)->header();
  std::vector<char> copy(h.payload_bytes);
  (*msg)->CopyPayload(copy.data());
  size_t pieces = 0;
  (*msg)->ForEachPayloadPiece([&](const char*, size_t n) { pieces += n; });
  if (pieces != h.payload_bytes) __builtin_trap();  // the pieces must cover the payload exactly
  oar::Variable var;
  (*msg)->DecodeInto(&var);
  return 0;
}

namespace oar::fuzz {

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  auto add = [&](char cuts, const std::string& name, const Variable* v, bool raw = false) {
    seeds.push_back(Prefixed(cuts, MessageBytes(name, v, 1, raw, 7)));
  };
  Variable dense;
  Tensor* t = dense.GetMutable<Tensor>();
  float* f = t->mutable_data<float>({2, 3});
  for (int i = 0; i < 6; ++i) f[i] = 0.5f * static_cast<float>(i);
  t->set_lod({{0, 1, 2}});
  add(0, "fc_w@GRAD", &dense);
  add(0x15, "fc_w@GRAD", &dense);  // cut into three slices
  Variable ids;
  int64_t* id = ids.GetMutable<Tensor>()->mutable_data<int64_t>({4});
  for (int i = 0; i < 4; ++i) id[i] = 3 * i;
  add(0x02, "prefetch_compress_in_tmp_0", &ids);
  Variable sparse;
  SelectedRows* sr = sparse.GetMutable<SelectedRows>();
  sr->height = 10;
  sr->rows = {1, 3, 7};
  float* v = sr->value.mutable_data<float>({3, 2});
  for (int i = 0; i < 6; ++i) v[i] = static_cast<float>(i);
  add(0, "emb@GRAD", &sparse);
  add(0x3f, "emb@GRAD", &sparse);
  Variable nccl_id;
  uint8_t* b = nccl_id.GetMutable<Tensor>()->mutable_data<uint8_t>({128});
  for (int i = 0; i < 128; ++i) b[i] = static_cast<uint8_t>(i);
  add(0, "NCCLID", &nccl_id, true);
  add(0, "BATCH_BARRIER@RECV", nullptr);
  Variable wide;
  *wide.GetMutable<Tensor>()->mutable_data<double>({1, 1}) = 2.0;
  add(0x01, "learning_rate_0", &wide);
  return seeds;
}

}  // namespace oar::fuzz
