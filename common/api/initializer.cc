#include "common/api/initializer.h"

#include <cmath>

namespace oar {
namespace {

int32_t EffectiveSeed(int32_t seed, const Program* startup) { return seed != 0 ? seed : startup->random_seed(); }

OpDesc* AppendFill(const std::string& type, const VarDesc& var, Program* startup) {
  OpDesc* op = startup->global_block()->AppendOp();
  op->type = type;
  op->SetOutput("Out", {var.name});
  op->SetAttr("shape", var.shape);
  op->SetAttr("dtype", static_cast<int32_t>(var.dtype));
  op->SetAttr(kOpRoleAttr, static_cast<int32_t>(startup->current_role));
  op->SetAttr(kOpRoleVarAttr, startup->current_role_var);
  return op;
}

class ConstantInit : public Initializer {
 public:
  ConstantInit(float v, bool force_cpu) : value_(v), force_cpu_(force_cpu) {}
  void Append(const VarDesc& var, Program* startup) const override {
    OpDesc* op = AppendFill("fill_constant", var, startup);
    op->SetAttr("value", value_);
    op->SetAttr("force_cpu", force_cpu_);
  }

 private:
  float value_;
  bool force_cpu_;
};

class UniformInit : public Initializer {
 public:
  UniformInit(float lo, float hi, int32_t seed) : lo_(lo), hi_(hi), seed_(seed) {}
  void Append(const VarDesc& var, Program* startup) const override {
    OpDesc* op = AppendFill("uniform_random", var, startup);
    op->SetAttr("min", lo_);
    op->SetAttr("max", hi_);
    op->SetAttr("seed", EffectiveSeed(seed_, startup));
  }

 private:
  float lo_, hi_;
  int32_t seed_;
};

class NormalInit : public Initializer {
 public:
  NormalInit(float mean, float std, int32_t seed) : mean_(mean), std_(std), seed_(seed) {}
  void Append(const VarDesc& var, Program* startup) const override {
    OpDesc* op = AppendFill("gaussian_random", var, startup);
    op->SetAttr("mean", mean_);
    op->SetAttr("std", std_);
    op->SetAttr("seed", EffectiveSeed(seed_, startup));
  }

 private:
  float mean_, std_;
  int32_t seed_;
};

class XavierInit : public Initializer {
 public:
  XavierInit(bool uniform, int64_t fan_in, int64_t fan_out, int32_t seed)
      : uniform_(uniform), fan_in_(fan_in), fan_out_(fan_out), seed_(seed) {}
  void Append(const VarDesc& var, Program* startup) const override {
    // Fluid's fans: [in, out] for matrices; for conv filters [out, in, k...]
    // each multiplied by the receptive field.
    int64_t in = 1, out = 1;
    const auto& s = var.shape;
    if (s.size() == 1) {
      in = out = s[0];
    } else if (s.size() == 2) {
      in = s[0];
      out = s[1];
    } else if (s.size() > 2) {
      int64_t field = 1;
      for (size_t i = 2; i < s.size(); ++i) field *= s[i];
      in = s[1] * field;
      out = s[0] * field;
    }
    if (fan_in_ > 0) in = fan_in_;
    if (fan_out_ > 0) out = fan_out_;
    double denom = static_cast<double>(in + out);
    if (uniform_) {
      float limit = static_cast<float>(std::sqrt(6.0 / denom));
      UniformInit(-limit, limit, seed_).Append(var, startup);
    } else {
      NormalInit(0.0f, static_cast<float>(std::sqrt(2.0 / denom)), seed_).Append(var, startup);
    }
  }

 private:
  bool uniform_;
  int64_t fan_in_, fan_out_;
  int32_t seed_;
};

}  // namespace

namespace initializer {
InitializerPtr Constant(float value, bool force_cpu) { return std::make_shared<ConstantInit>(value, force_cpu); }
InitializerPtr Uniform(float lo, float hi, int32_t seed) { return std::make_shared<UniformInit>(lo, hi, seed); }
InitializerPtr Normal(float loc, float scale, int32_t seed) { return std::make_shared<NormalInit>(loc, scale, seed); }
InitializerPtr Xavier(bool uniform, int64_t fan_in, int64_t fan_out, int32_t seed) {
  return std::make_shared<XavierInit>(uniform, fan_in, fan_out, seed);
}
}  // namespace initializer

}  // namespace oar
