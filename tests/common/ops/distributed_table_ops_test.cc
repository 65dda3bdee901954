// split_ids, merge_ids, lookup_sparse_table and the table updates of sgd,
// adagrad and adam: against hand-built values and the dense ops on the same
// rows.
#include "common/framework/selected_rows_util.h"
#include "common/framework/sparse_table.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

SparseTable* MakeTable(Scope* s, const std::string& name, int64_t width, RowInitializer init = {}) {
  SparseTable* t = s->Var(name)->GetMutable<SparseTable>();
  EXPECT_TRUE(t->Configure(width).ok());
  t->SetInitializer(init);
  return t;
}

SelectedRows Rows(std::vector<int64_t> rows, int64_t height, std::vector<float> values, int64_t width) {
  SelectedRows sr;
  sr.rows = std::move(rows);
  sr.height = height;
  sr.value = MakeTensor<float>({static_cast<int64_t>(sr.rows.size()), width}, values);
  return sr;
}

TEST(SplitIdsOpTest, IdsAreUniqueSortedAndCutByModulo) {
  Scope s;
  SetTensor(&s, "a", MakeTensor<int64_t>({4, 1}, {7, 2, 7, 4}));
  SetTensor(&s, "b", MakeTensor<int64_t>({2, 1}, {5, 2}));
  ASSERT_TRUE(RunOps({MakeOp("split_ids", {{"Ids", {"a", "b"}}}, {{"Out", {"p0", "p1"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "p0")), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "p1")), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(GetTensor(s, "p0").dims(), (DDim{2, 1}));
  SetTensor(&s, "bad", MakeTensor<int64_t>({1, 1}, {-3}));
  EXPECT_NE(RunOps({MakeOp("split_ids", {{"Ids", {"bad"}}}, {{"Out", {"p0", "p1"}}})}, &s).message().find("id -3"),
            std::string::npos);
}

TEST(SplitIdsOpTest, ASparseGradientKeepsEveryRowWithItsOwnValue) {
  Scope s;
  *s.Var("g")->GetMutable<SelectedRows>() = Rows({3, 4, 3, 6}, 10, {1, 1, 2, 2, 3, 3, 4, 4}, 2);
  ASSERT_TRUE(RunOps({MakeOp("split_ids", {{"Ids", {"g"}}}, {{"Out", {"g0", "g1"}}})}, &s).ok());
  const SelectedRows& g0 = s.FindVar("g0")->Get<SelectedRows>();
  const SelectedRows& g1 = s.FindVar("g1")->Get<SelectedRows>();
  EXPECT_EQ(g0.rows, (std::vector<int64_t>{4, 6}));  // global ids
  EXPECT_EQ(TensorToVector<float>(g0.value), (std::vector<float>{2, 2, 4, 4}));
  EXPECT_EQ(g1.rows, (std::vector<int64_t>{3, 3}));  // a repeated id: both rows, each its own value
  EXPECT_EQ(TensorToVector<float>(g1.value), (std::vector<float>{1, 1, 3, 3}));
  EXPECT_EQ(g0.height, 10);
}

TEST(MergeIdsOpTest, RowsGoBackInEachInputsOrderWithItsLoD) {
  Scope s;
  Tensor a = MakeTensor<int64_t>({3, 1}, {5, 2, 5});
  a.set_lod({{0, 1, 3}});
  SetTensor(&s, "a", a);
  SetTensor(&s, "b", MakeTensor<int64_t>({1, 1}, {4}));
  SetTensor(&s, "r0", MakeTensor<int64_t>({2, 1}, {2, 4}));
  SetTensor(&s, "r1", MakeTensor<int64_t>({1, 1}, {5}));
  SetTensor(&s, "x0", MakeTensor<float>({2, 2}, {20, 21, 40, 41}));
  SetTensor(&s, "x1", MakeTensor<float>({1, 2}, {50, 51}));
  ASSERT_TRUE(RunOps({MakeOp("merge_ids", {{"Ids", {"a", "b"}}, {"Rows", {"r0", "r1"}}, {"X", {"x0", "x1"}}},
                             {{"Out", {"oa", "ob"}}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "oa")), (std::vector<float>{50, 51, 20, 21, 50, 51}));
  EXPECT_EQ(GetTensor(s, "oa").lod(), a.lod());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "ob")), (std::vector<float>{40, 41}));
  SetTensor(&s, "c", MakeTensor<int64_t>({1, 1}, {9}));
  absl::Status st = RunOps(
      {MakeOp("merge_ids", {{"Ids", {"c"}}, {"Rows", {"r0", "r1"}}, {"X", {"x0", "x1"}}}, {{"Out", {"oc"}}})}, &s);
  EXPECT_NE(st.message().find("id 9"), std::string::npos) << st;
}

TEST(LookupSparseTableOpTest, ReturnsTheRowsALocalLookupTableWould) {
  // The same values in a dense table and a sparse one: the same rows out.
  Scope s;
  const Tensor dense = RandomTensor<float>({50, 4}, -1, 1, 3);
  SetTensor(&s, "w", dense);
  SparseTable* table = MakeTable(&s, "t", 4);
  std::vector<int64_t> all(50);
  for (int64_t i = 0; i < 50; ++i) all[i] = i;
  ASSERT_TRUE(table->Assign(all, dense.data<float>()).ok());
  SetTensor(&s, "ids", MakeTensor<int64_t>({5, 1}, {49, 0, 7, 7, 23}));
  ASSERT_TRUE(RunOps({MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"want"}}}),
                      MakeOp("lookup_sparse_table", {{"W", {"t"}}, {"Ids", {"ids"}}}, {{"Out", {"got"}}},
                             {{"is_distributed", true}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "got")), TensorToVector<float>(GetTensor(s, "want")));
  EXPECT_EQ(GetTensor(s, "got").dims(), (DDim{5, 4}));
}

TEST(LookupSparseTableOpTest, AbsentRowsAreMadeWithTheInitializerOrReadAsZeros) {
  Scope s;
  SparseTable* t = MakeTable(&s, "t", 3, {RowInitializer::Kind::kConstant, 0.5f, 0});
  SetTensor(&s, "ids", MakeTensor<int64_t>({2, 1}, {int64_t{1} << 40, 3}));  // 64-bit ids
  ASSERT_TRUE(RunOps({MakeOp("lookup_sparse_table", {{"W", {"t"}}, {"Ids", {"ids"}}}, {{"Out", {"o"}}},
                             {{"auto_grown_table", false}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), std::vector<float>(6, 0.0f));
  EXPECT_EQ(t->size(), 0);
  ASSERT_TRUE(RunOps({MakeOp("lookup_sparse_table", {{"W", {"t"}}, {"Ids", {"ids"}}}, {{"Out", {"o"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), std::vector<float>(6, 0.5f));
  EXPECT_EQ(t->size(), 2);
}

TEST(InitializerOpTest, AnInitializerOfATableSetsItsRowsRuleInsteadOfFillingRows) {
  Scope s;
  SparseTable* t = MakeTable(&s, "t", 4);
  ASSERT_TRUE(
      RunOps(
          {MakeOp(
              "uniform_random", {}, {{"Out", {"t"}}},
              {{"shape", std::vector<int64_t>{1000000000, 4}}, {"min", -2.0f}, {"max", 2.0f}, {"seed", int32_t{5}}})},
          &s)
          .ok());
  EXPECT_EQ(t->size(), 0);  // a billion rows declared, none made
  EXPECT_EQ(t->declared_height(), 1000000000);
  const float* r = t->FindOrCreate(123);
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(r[k] >= -2.0f && r[k] <= 2.0f) << r[k];
}

// sgd / adagrad / adam on a table equal the dense ops on the same rows.
void CheckTableUpdateMatchesDense(const std::string& type) {
  SCOPED_TRACE(type);
  Scope s;
  const Tensor dense = RandomTensor<float>({6, 3}, -1, 1, 7);
  SetTensor(&s, "p", dense);
  SparseTable* table = MakeTable(&s, "t", 3);
  std::vector<int64_t> ids = {0, 1, 2, 3, 4, 5};
  ASSERT_TRUE(table->Assign(ids, dense.data<float>()).ok());
  SetTensor(&s, "lr", MakeTensor<float>({1}, {0.3f}));
  const SelectedRows g = Rows({4, 1, 4}, 6, {0.5f, -1, 2, 0.25f, 0.5f, -0.5f, 1, 1, 1}, 3);
  *s.Var("g")->GetMutable<SelectedRows>() = g;
  OpDesc::VarMap in = {{"Grad", {"g"}}, {"LearningRate", {"lr"}}}, in_t = in;
  OpDesc::VarMap out, out_t;
  in["Param"] = {"p"};
  out["ParamOut"] = {"p"};
  in_t["Param"] = {"t"};
  out_t["ParamOut"] = {"t"};
  std::map<std::string, Attribute> attrs;
  auto acc = [&](const std::string& slot) {
    SetTensor(&s, slot + "_d", MakeTensor<float>({6, 3}, std::vector<float>(18, 0.0f)));
    SparseTable* a = MakeTable(&s, slot + "_t", 3);
    ASSERT_TRUE(a->Follow(*table).ok());
    in[slot] = {slot + "_d"};
    out[slot + "Out"] = {slot + "_d"};
    in_t[slot] = {slot + "_t"};
    out_t[slot + "Out"] = {slot + "_t"};
  };
  if (type == "adagrad") acc("Moment");
  if (type == "adam") {
    acc("Moment1");
    acc("Moment2");
    SetTensor(&s, "b1p", MakeTensor<float>({1}, {0.9f}));
    SetTensor(&s, "b2p", MakeTensor<float>({1}, {0.999f}));
    in["Beta1Pow"] = in_t["Beta1Pow"] = {"b1p"};
    in["Beta2Pow"] = in_t["Beta2Pow"] = {"b2p"};
    attrs["lazy_mode"] = true;
  }
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(RunOps({MakeOp(type, in, out, attrs), MakeOp(type, in_t, out_t, attrs)}, &s).ok());
  }
  const auto want = TensorToVector<float>(GetTensor(s, "p"));
  for (int64_t id = 0; id < 6; ++id) {
    const float* row = table->Find(id);
    ASSERT_NE(row, nullptr);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(row[k], want[id * 3 + k], 1e-6) << id << "," << k;
  }
}

TEST(TableUpdateTest, SgdAdagradAndLazyAdamMatchTheDenseOps) {
  for (const char* type : {"sgd", "adagrad", "adam"}) CheckTableUpdateMatchesDense(type);
}

TEST(TableUpdateTest, ATableIsUpdatedInPlaceOnly) {
  Scope s;
  MakeTable(&s, "t", 2);
  SetTensor(&s, "lr", MakeTensor<float>({1}, {0.1f}));
  *s.Var("g")->GetMutable<SelectedRows>() = Rows({1}, 4, {1, 1}, 2);
  absl::Status st = RunOps(
      {MakeOp("sgd", {{"Param", {"t"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"other"}}})}, &s);
  EXPECT_NE(st.message().find("updated in place"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace oar::testing
