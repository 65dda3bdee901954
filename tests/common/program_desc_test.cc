#include "common/framework/program_desc.h"

#include "gtest/gtest.h"

namespace oar {
namespace {

ProgramDesc SampleProgram() {
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  VarDesc* x = b->Var("x");
  x->shape = {-1, 784};
  x->need_check_feed = true;
  VarDesc* w = b->Var("fc_0.w_0");
  w->shape = {784, 10};
  w->persistable = true;
  VarDesc* l = b->Var("label");
  l->dtype = DataType::kInt64;
  l->shape = {-1, 1};
  OpDesc* op = b->AppendOp();
  op->type = "mul";
  op->SetInput("X", {"x"});
  op->SetInput("Y", {"fc_0.w_0"});
  op->SetOutput("Out", {"fc_0.tmp_0"});
  op->SetAttr("x_num_col_dims", int32_t{1});
  op->SetAttr("op_role_var", std::vector<std::string>{"a", "b"});
  op->SetAttr("shape", std::vector<int64_t>{1, -1});
  op->SetAttr("scale", 0.5f);
  op->SetAttr("flag", true);
  op->SetAttr("sub_block", BlockRef{1});
  BlockDesc* sub = p.AppendBlock(0);
  sub->Var("inner")->dtype = DataType::kFloat64;
  return p;
}

TEST(ProgramDescTest, RoundTripsThroughProtoBytes) {
  ProgramDesc p = SampleProgram();
  std::string bytes = p.Serialize();
  auto parsed = ProgramDesc::Parse(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)->Serialize(), bytes);
  EXPECT_EQ((*parsed)->ToString(), p.ToString());
  const BlockDesc& b = (*parsed)->Block(0);
  EXPECT_EQ(b.FindVar("x")->shape, (std::vector<int64_t>{-1, 784}));
  EXPECT_TRUE(b.FindVar("fc_0.w_0")->persistable);
  EXPECT_EQ(b.FindVar("label")->dtype, DataType::kInt64);
  EXPECT_EQ(b.Op(0).GetAttr<BlockRef>("sub_block").idx, 1);
  EXPECT_EQ((*parsed)->Block(1).parent_idx(), 0);
}

TEST(ProgramDescTest, KeepsFluidFieldNumbers) {
  // Field numbers are a wire contract with Fluid: OpDesc.type is field 3,
  // inputs 1, outputs 2, attrs 4; VarType.lod_tensor is 3.
  paddle::framework::proto::ProgramDesc pb = SampleProgram().ToProto();
  const auto* op_desc = paddle::framework::proto::OpDesc::descriptor();
  EXPECT_EQ(op_desc->FindFieldByName("type")->number(), 3);
  EXPECT_EQ(op_desc->FindFieldByName("inputs")->number(), 1);
  EXPECT_EQ(op_desc->FindFieldByName("attrs")->number(), 4);
  EXPECT_EQ(paddle::framework::proto::VarType::descriptor()->FindFieldByName("lod_tensor")->number(), 3);
  EXPECT_EQ(paddle::framework::proto::ProgramDesc::descriptor()->FindFieldByName("version")->number(), 4);
  EXPECT_EQ(paddle::framework::proto::VarType::FP32, 5);
  EXPECT_EQ(paddle::framework::proto::VarType::LOD_TENSOR, 7);
  EXPECT_EQ(paddle::framework::proto::LONGS, 11);
  EXPECT_EQ(pb.blocks(0).vars(0).name(), "fc_0.w_0");  // vars are written in name order
}

TEST(ProgramDescTest, MalformedBytesAreAnErrorNotACrash) {
  auto parsed = ProgramDesc::Parse("this is not a program");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("ProgramDesc"), std::string::npos);
  std::string bytes = SampleProgram().Serialize();
  for (size_t cut : {size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    auto truncated = ProgramDesc::Parse(bytes.substr(0, cut));
    EXPECT_FALSE(truncated.ok()) << "cut at " << cut;
  }
}

TEST(ProgramDescTest, RejectsInconsistentBlockIndices) {
  paddle::framework::proto::ProgramDesc pb = SampleProgram().ToProto();
  pb.mutable_blocks(1)->set_parent_idx(7);
  auto parsed = ProgramDesc::FromProto(pb);
  EXPECT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("block 1"), std::string::npos) << parsed.status();
}

TEST(ProgramDescTest, RejectsNonElementTensorType) {
  paddle::framework::proto::ProgramDesc pb = SampleProgram().ToProto();
  pb.mutable_blocks(0)->mutable_vars(0)->mutable_type()->mutable_lod_tensor()->mutable_tensor()->set_data_type(
      paddle::framework::proto::VarType::READER);
  auto parsed = ProgramDesc::FromProto(pb);
  EXPECT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("fc_0.w_0"), std::string::npos) << parsed.status();
}

TEST(ProgramDescTest, EditsBumpVersionAndCopiesAreIndependent) {
  ProgramDesc p = SampleProgram();
  uint64_t v = p.version();
  p.MutableBlock(0)->Var("new_var");
  EXPECT_GT(p.version(), v);
  ProgramDesc copy(p);
  EXPECT_NE(copy.id(), p.id());
  copy.MutableBlock(0)->MutableOp(0)->type = "changed";
  EXPECT_EQ(p.Block(0).Op(0).type, "mul");
  EXPECT_EQ(&copy.Block(1).program()->Block(0), &copy.Block(0));
}

TEST(OpDescTest, RenamesArgumentsInEverySlot) {
  OpDesc op;
  op.SetInput("X", {"a", "b", "a"});
  op.SetOutput("Out", {"a"});
  op.RenameInput("a", "z");
  EXPECT_EQ(op.Input("X"), (std::vector<std::string>{"z", "b", "z"}));
  EXPECT_EQ(op.Output("Out"), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(op.Input("Missing").empty());
}

}  // namespace
}  // namespace oar
