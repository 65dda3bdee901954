#include "common/rpc/var_serde.h"

#include <cstring>

#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

Tensor Filled(DataType dt, const DDim& dims) {
  Tensor t;
  t.Resize(dims);
  auto* p = static_cast<uint8_t*>(t.mutable_data(dt));
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 7 + 3);
  return t;
}

struct Received {
  sendrecv::VariableMessage meta;
  Variable var;
};

struct SendOptions {
  int64_t trainer_id = 0;
  std::string out_varname;
  bool raw_bytes = false;
};

absl::StatusOr<grpc::ByteBuffer> SerializeVar(const std::string& name, const Variable* v, SendOptions o = {}) {
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(o.trainer_id);
  meta.set_out_varname(o.out_varname);
  auto h = HeaderOf(meta, v, o.raw_bytes);
  if (!h.ok()) return h.status();
  return SerializeMessage(*h, v);
}

absl::StatusOr<Received> DeserializeVar(const grpc::ByteBuffer& buf) {
  auto m = ParseMessage(buf);
  if (!m.ok()) return m.status();
  Received r;
  r.meta = (*m)->header().meta;
  (*m)->DecodeInto(&r.var);
  return r;
}

absl::StatusOr<Received> RoundTrip(const std::string& name, const Variable* v, SendOptions o = {}) {
  auto buf = SerializeVar(name, v, o);
  if (!buf.ok()) return buf.status();
  return DeserializeVar(*buf);
}

class SerdeDtypeTest : public ::testing::TestWithParam<DataType> {};

TEST_P(SerdeDtypeTest, LoDTensorRoundTripsBitForBit) {
  Variable v;
  Tensor* t = v.GetMutable<Tensor>();
  *t = Filled(GetParam(), {5, 3});
  t->set_lod({{0, 2, 5}});
  auto r = RoundTrip("w", &v, {.trainer_id = 3, .out_varname = "o"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->meta.varname(), "w");
  EXPECT_EQ(r->meta.trainer_id(), 3);
  EXPECT_EQ(r->meta.out_varname(), "o");
  ASSERT_TRUE(r->var.IsType<Tensor>());
  const Tensor& got = r->var.Get<Tensor>();
  EXPECT_EQ(got.dtype(), GetParam());
  EXPECT_EQ(got.dims(), (DDim{5, 3}));
  EXPECT_EQ(got.lod(), (LoD{{0, 2, 5}}));
  EXPECT_EQ(std::memcmp(got.raw_data(), t->raw_data(), t->nbytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SerdeDtypeTest,
                         ::testing::Values(DataType::kBool, DataType::kInt16, DataType::kInt32, DataType::kInt64,
                                           DataType::kFloat16, DataType::kFloat32, DataType::kFloat64, DataType::kUInt8,
                                           DataType::kInt8));

TEST(SerdeTest, SelectedRowsRoundTrip) {
  Variable v;
  SelectedRows* sr = v.GetMutable<SelectedRows>();
  sr->height = 10;
  sr->rows = {7, 2, 7};
  sr->value = Filled(DataType::kFloat32, {3, 4});
  auto r = RoundTrip("emb@GRAD", &v);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->var.IsType<SelectedRows>());
  const SelectedRows& got = r->var.Get<SelectedRows>();
  EXPECT_EQ(got.height, 10);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{7, 2, 7}));
  EXPECT_EQ(std::memcmp(got.value.raw_data(), sr->value.raw_data(), sr->value.nbytes()), 0);
}

TEST(SerdeTest, EmptyTensorsHeaderOnlyAndRawBytes) {
  Variable empty;
  empty.GetMutable<Tensor>()->Resize({0, 4});
  empty.GetMutable<Tensor>()->mutable_data(DataType::kFloat32);
  auto r = RoundTrip("e", &empty);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->var.Get<Tensor>().dims(), (DDim{0, 4}));

  auto h = RoundTrip("BATCH_BARRIER@RECV", nullptr, {.trainer_id = 2});
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->var.IsInitialized());
  EXPECT_EQ(h->meta.trainer_id(), 2);

  Variable id;
  *id.GetMutable<Tensor>() = Filled(DataType::kUInt8, {128});
  auto n = RoundTrip("NCCLID", &id, {.raw_bytes = true});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->meta.type(), sendrecv::NCCL_ID);
  EXPECT_EQ(n->var.Get<Tensor>().numel(), 128);
}

TEST(SerdeTest, PayloadIsNotCopiedOnSendAndOutlivesTheTensor) {
  grpc::ByteBuffer buf;
  const void* data = nullptr;
  {
    Variable v;
    *v.GetMutable<Tensor>() = Filled(DataType::kFloat32, {1024});
    data = v.Get<Tensor>().raw_data();
    auto b = SerializeVar("x", &v);
    ASSERT_TRUE(b.ok());
    buf = *b;
  }  // the variable is gone; the slice keeps its buffer alive
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buf.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), data);
  auto r = DeserializeVar(buf);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->var.Get<Tensor>().data<float>()[0], Filled(DataType::kFloat32, {1}).data<float>()[0]);
}

TEST(SerdeTest, MalformedMessagesAreErrorsNotCrashes) {
  Variable v;
  *v.GetMutable<Tensor>() = Filled(DataType::kFloat32, {4, 2});
  auto good = SerializeVar("w", &v);
  ASSERT_TRUE(good.ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(good->Dump(&slices).ok());
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  auto parse = [](const std::string& b) {
    grpc::Slice s(b);
    return DeserializeVar(grpc::ByteBuffer(&s, 1));
  };
  ASSERT_TRUE(parse(bytes).ok());
  // Truncated anywhere: an error each time.
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto r = parse(bytes.substr(0, n));
    EXPECT_FALSE(r.ok() && r->var.IsType<Tensor>() && r->var.Get<Tensor>().numel() == 8) << n;
  }
  // A header that claims more elements than the payload holds.
  sendrecv::VariableMessage lie;
  lie.set_varname("w");
  lie.set_data_type(sendrecv::VariableMessage::FP32);
  lie.add_dims(1000);
  lie.set_serialized(std::string(8, '\0'));
  auto r = parse(lie.SerializeAsString());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("8 bytes"), std::string::npos) << r.status();
  // Rows outside the height.
  sendrecv::VariableMessage rows;
  rows.set_varname("e");
  rows.set_type(sendrecv::SELECTED_ROWS);
  rows.set_data_type(sendrecv::VariableMessage::FP32);
  rows.add_dims(1);
  rows.add_dims(1);
  rows.set_slr_height(2);
  int64_t row = 5;
  rows.set_rows(&row, sizeof(row));
  rows.set_serialized(std::string(4, '\0'));
  EXPECT_NE(parse(rows.SerializeAsString()).status().message().find("row 5 outside height 2"), std::string::npos);
  // Garbage.
  EXPECT_FALSE(parse(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11)).ok());
}

// Regression: dims [2^62+1] of fp32 multiplied to 4 bytes (mod 2^64) and
// passed the payload check with a 4-byte payload; now the product is checked
// before anything is allocated.
TEST(SerdeTest, DimsWhoseProductOverflowsAreRefusedFromTheHeader) {
  sendrecv::VariableMessage lie;
  lie.set_varname("g");
  lie.set_data_type(sendrecv::VariableMessage::FP32);
  lie.add_dims((int64_t{1} << 62) + 1);
  lie.set_serialized(std::string(4, '\0'));
  grpc::Slice s(lie.SerializeAsString());
  auto r = ParseMessage(grpc::ByteBuffer(&s, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("overflows"), std::string::npos) << r.status();
  lie.clear_dims();
  lie.add_dims(int64_t{1} << 40);
  lie.add_dims(int64_t{1} << 40);
  grpc::Slice s2(lie.SerializeAsString());
  EXPECT_FALSE(ParseMessage(grpc::ByteBuffer(&s2, 1)).ok());
  EXPECT_FALSE(CheckedBytes(DDim{-1, 4}, DataType::kFloat32).ok());
  EXPECT_EQ(*CheckedBytes(DDim{3, 4}, DataType::kFloat64), 96u);
}

// The payload spread over slices that cut elements in half is still added
// element by element into the destination.
TEST(SerdeTest, AddPayloadIntoSumsAcrossSlicesThatCutElements) {
  Variable v;
  float* p = v.GetMutable<Tensor>()->mutable_data<float>({7});
  for (int i = 0; i < 7; ++i) p[i] = 0.5f * static_cast<float>(i);
  auto buf = SerializeVar("g", &v);
  ASSERT_TRUE(buf.ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buf->Dump(&slices).ok());
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // Cut the bytes into 3-byte slices.
  std::vector<grpc::Slice> cut;
  for (size_t i = 0; i < bytes.size(); i += 3) cut.emplace_back(bytes.substr(i, 3));
  auto msg = ParseMessage(grpc::ByteBuffer(cut.data(), cut.size()));
  ASSERT_TRUE(msg.ok()) << msg.status();
  Tensor acc;
  float* a = acc.mutable_data<float>({7});
  for (int i = 0; i < 7; ++i) a[i] = 100.0f;
  ASSERT_TRUE((*msg)->AddPayloadInto(&acc).ok());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a[i], 100.0f + 0.5f * static_cast<float>(i)) << i;
  Tensor wrong;
  wrong.mutable_data<float>({6});
  EXPECT_EQ((*msg)->AddPayloadInto(&wrong).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oar::rpc
