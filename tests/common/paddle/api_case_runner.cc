#include "tests/common/paddle/api_case_runner.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/api/io.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_check.h"
#include "common/framework/tensor_io.h"

namespace oar::api_coverage {
namespace {

constexpr const char* kNone = "—";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line of `s`, at most 110 characters: a table cell.
std::string Cell(std::string s) {
  s = s.substr(0, s.find('\n'));
  std::replace(s.begin(), s.end(), '|', '/');
  return s.size() > 110 ? s.substr(0, 107) + "..." : s;
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(t.numel());
  switch (t.dtype()) {
    case DataType::kFloat32:
      std::copy_n(t.data<float>(), v.size(), v.begin());
      break;
    case DataType::kFloat64:
      std::copy_n(t.data<double>(), v.size(), v.begin());
      break;
    case DataType::kInt32:
      std::copy_n(t.data<int32_t>(), v.size(), v.begin());
      break;
    case DataType::kInt64:
      std::copy_n(t.data<int64_t>(), v.size(), v.begin());
      break;
    case DataType::kBool:
      std::copy_n(t.data<bool>(), v.size(), v.begin());
      break;
    case DataType::kUInt8:
      std::copy_n(t.data<uint8_t>(), v.size(), v.begin());
      break;
    case DataType::kInt8:
      std::copy_n(t.data<int8_t>(), v.size(), v.begin());
      break;
    default:
      break;
  }
  return v;
}

// Empty when `got` equals `want`; else why not (with the magnitude in
// `*detail`).
std::string Compare(const std::string& name, const Tensor& got, const Tensor& want, bool values, std::string* detail) {
  if (got.dims() != want.dims()) {
    return absl::StrCat(name, " has shape ", got.dims().ToString(), ", Paddle's ", want.dims().ToString());
  }
  if (!values) return "";
  if (got.dtype() != want.dtype()) {
    return absl::StrCat(name, " is ", DataTypeName(got.dtype()), ", Paddle's ", DataTypeName(want.dtype()));
  }
  const std::vector<double> g = Values(got), w = Values(want);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i]));
    if (!(err <= worst)) worst = err, at = i;  // NaN counts as worst
  }
  if (worst <= kTolerance) return "";
  absl::StrAppend(detail, name, "[", at, "] = ", g[at], ", Paddle's ", w[at], " (relative error ", worst, "); ");
  return absl::StrCat(name, " differs");
}

std::string RefusalSummary(const std::vector<OpRefusal>& refusals) {
  std::vector<std::string> unknown, other;
  for (const OpRefusal& r : refusals) {
    if (r.unknown_type) {
      unknown.push_back(r.op_type);
    } else {
      other.push_back(absl::StrCat(r.op_type, ": ", r.reason));
    }
  }
  std::string s = unknown.empty() ? "" : absl::StrCat("no op ", absl::StrJoin(unknown, ", "));
  if (!other.empty()) absl::StrAppend(&s, s.empty() ? "" : "; ", other.front());
  return s;
}

}  // namespace

bool ApiCaseResult::covered() const {
  return loads == "yes" && (forward == "equal" || absl::StartsWith(forward, "shapes equal")) &&
         (gradient == "equal" || absl::StartsWith(gradient, "none") || gradient == kNone);
}

ApiCaseResult RunApiCase(const std::string& dir) {
  ApiCaseResult r{.loads = "yes", .forward = kNone, .gradient = kNone};
  auto main = ProgramDesc::Parse(ReadAll(dir + "/main.pb"));
  auto startup = ProgramDesc::Parse(ReadAll(dir + "/startup.pb"));
  if (!main.ok() || !startup.ok()) {
    r.loads = Cell(absl::StrCat("refused: ", (main.ok() ? startup.status() : main.status()).message()));
    return r;
  }
  std::vector<OpRefusal> refusals = FindRefusals(**main, OpRegistry::Global());
  for (OpRefusal& s : FindRefusals(**startup, OpRegistry::Global())) refusals.push_back(std::move(s));
  if (!refusals.empty()) {
    r.loads = Cell("refused: " + RefusalSummary(refusals));
    return r;
  }

  std::vector<std::string> feeds;
  struct Fetch {
    std::string name, kind;
  };
  std::vector<Fetch> fetches;
  for (absl::string_view line : absl::StrSplit(ReadAll(dir + "/meta.txt"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> w = absl::StrSplit(line, ' ');
    if (w[0] == "feed") feeds.push_back(w[1]);
    if (w[0] == "fetch") fetches.push_back({w[1], w[2]});
  }
  std::ifstream data(dir + "/data", std::ios::binary);
  FeedMap feed;
  for (const std::string& name : feeds) {
    if (!ReadLoDTensor(data, dir + "/data", &feed[name]).ok()) return {.loads = "fixture unreadable"};
  }
  std::vector<Tensor> want(fetches.size());
  std::vector<std::string> names;
  for (size_t i = 0; i < fetches.size(); ++i) {
    if (!ReadLoDTensor(data, dir + "/data", &want[i]).ok()) return {.loads = "fixture unreadable"};
    names.push_back(fetches[i].name);
  }

  Executor exe;
  Scope scope;
  absl::Status s = exe.Run(**startup, &scope).status();
  if (s.ok() && std::ifstream(dir + "/params").good()) s = load_persistables(exe, &scope, dir, **main, "params");
  absl::StatusOr<std::vector<Tensor>> got = s.ok() ? exe.Run(**main, &scope, feed, names) : s;
  if (!got.ok()) {
    r.forward = Cell(absl::StrCat("fails: ", got.status().message()));
    r.detail = std::string(got.status().message());
    return r;
  }
  std::vector<std::string> fwd_diffs, grad_diffs;
  bool random = false, any_grad = false;
  for (size_t i = 0; i < fetches.size(); ++i) {
    const bool grad = fetches[i].kind == "grad";
    random |= fetches[i].kind == "shape";
    any_grad |= grad;
    const std::string why = Compare(names[i], (*got)[i], want[i], fetches[i].kind != "shape", &r.detail);
    if (!why.empty()) (grad ? grad_diffs : fwd_diffs).push_back(why);
  }
  if (fwd_diffs.empty()) {
    r.forward = random ? "shapes equal (random)" : "equal";
  } else {
    r.forward = Cell("differs: " + absl::StrJoin(fwd_diffs, "; "));
  }
  if (!any_grad) {
    r.gradient = random ? kNone : "none (not differentiable)";
  } else {
    r.gradient = grad_diffs.empty() ? "equal" : Cell("differs: " + absl::StrJoin(grad_diffs, "; "));
  }
  return r;
}

}  // namespace oar::api_coverage
