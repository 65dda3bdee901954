// fluid.layers in C++: each function appends the ops Fluid's Python layer of
// the same name appends, with the same names (fc_0.w_0, fc_0.tmp_1, ...), to
// the current main program (and parameters' initializers to the startup
// program). See program.h for how errors surface (Program::status()).
//
//   Var x = layers::data("x", {784});
//   Var label = layers::data("label", {1}, DataType::kInt64);
//   Var h = layers::fc(x, 256, "relu");
//   Var loss = layers::mean(layers::cross_entropy(layers::fc(h, 10, "softmax"), label));
//
// Thread-safety: externally synchronized (appends to the thread's programs).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/api/param_attr.h"
#include "common/api/program.h"

namespace oar {
namespace layers {

// A feed target. With append_batch_size, shape gets a leading -1.
Var data(const std::string& name, std::vector<int64_t> shape, DataType dtype = DataType::kFloat32,
         int32_t lod_level = 0, bool append_batch_size = true);

// Fully connected: mul (+ sum over several inputs) + elementwise_add bias +
// activation `act` ("" for none).
Var fc(const Var& input, int64_t size, const std::string& act = "", const ParamAttr& param_attr = {},
       const ParamAttr& bias_attr = {}, int32_t num_flatten_dims = 1, const std::string& name = "");
Var fc(const std::vector<Var>& inputs, int64_t size, const std::string& act = "", const ParamAttr& param_attr = {},
       const ParamAttr& bias_attr = {}, int32_t num_flatten_dims = 1, const std::string& name = "");

Var relu(const Var& x, const std::string& name = "");
Var sigmoid(const Var& x, const std::string& name = "");
Var tanh(const Var& x, const std::string& name = "");
Var softmax(const Var& x, bool use_cudnn = false, const std::string& name = "", int32_t axis = -1);
Var square(const Var& x, const std::string& name = "");
Var scale(const Var& x, float scale = 1.0f, float bias = 0.0f, bool bias_after_scale = true,
          const std::string& act = "", const std::string& name = "");

Var elementwise_add(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var elementwise_sub(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var elementwise_mul(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var elementwise_div(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var matmul(const Var& x, const Var& y, bool transpose_x = false, bool transpose_y = false, float alpha = 1.0f,
           const std::string& name = "");
Var sums(const std::vector<Var>& xs);

Var cross_entropy(const Var& input, const Var& label, bool soft_label = false, int32_t ignore_index = -100);
// Returns the loss; `softmax_out` (if not null) receives the softmax.
Var softmax_with_cross_entropy(const Var& logits, const Var& label, bool soft_label = false,
                               int32_t ignore_index = -100, bool numeric_stable_mode = true,
                               Var* softmax_out = nullptr);
Var square_error_cost(const Var& input, const Var& label);
Var mean(const Var& x, const std::string& name = "");

// (values, int64 indices) of the k largest entries along the last axis.
std::pair<Var, Var> topk(const Var& input, int32_t k, const std::string& name = "");
Var accuracy(const Var& input, const Var& label, int32_t k = 1);
// Fluid 1.x's auc layer: two `auc` ops over `input` ([N, 2] probabilities)
// and `label` (int64 [N, 1]) — the batch AUC over the last `slide_steps`
// batches and the global AUC over every batch — with their persistable
// int64 counts (zeros in startup), as Fluid builds it.
struct AucVars {
  Var auc, batch_auc;                                      // float64 [1]
  Var batch_stat_pos, batch_stat_neg, stat_pos, stat_neg;  // the counts
};
AucVars auc(const Var& input, const Var& label, const std::string& curve = "ROC", int32_t num_thresholds = 4095,
            int32_t slide_steps = 1);

// A tensor filled with `value` (fill_constant in the main program).
Var fill_constant(const std::vector<int64_t>& shape, DataType dtype, float value, bool force_cpu = false);
// A persistable variable initialized to `value` in the startup program.
Var create_global_var(const std::vector<int64_t>& shape, float value, DataType dtype, bool persistable = true,
                      const std::string& name = "", bool force_cpu = false);

// ---- vision and shape layers (layers_nn.cc) ----

// conv2d over NCHW input; default filter init Normal(0, sqrt(2/(k·k·C))) and
// a [num_filters] bias, as Fluid.
Var conv2d(const Var& input, int32_t num_filters, std::vector<int32_t> filter_size,
           std::vector<int32_t> stride = {1, 1}, std::vector<int32_t> padding = {0, 0},
           std::vector<int32_t> dilation = {1, 1}, int32_t groups = 1, const ParamAttr& param_attr = {},
           const ParamAttr& bias_attr = {}, bool use_cudnn = true, const std::string& act = "",
           const std::string& name = "");
Var pool2d(const Var& input, std::vector<int32_t> pool_size, const std::string& pool_type = "max",
           std::vector<int32_t> pool_stride = {1, 1}, std::vector<int32_t> pool_padding = {0, 0},
           bool global_pooling = false, bool use_cudnn = true, bool ceil_mode = false, const std::string& name = "",
           bool exclusive = true);
Var batch_norm(const Var& input, const std::string& act = "", bool is_test = false, float momentum = 0.9f,
               float epsilon = 1e-5f, const ParamAttr& param_attr = {}, const ParamAttr& bias_attr = {},
               const std::string& name = "", const std::string& moving_mean_name = "",
               const std::string& moving_variance_name = "", bool use_global_stats = false);
// seed < 0: unseeded.
Var dropout(const Var& x, float dropout_prob, bool is_test = false, int32_t seed = -1, const std::string& name = "",
            const std::string& dropout_implementation = "downgrade_in_infer");
Var reshape(const Var& x, const std::vector<int32_t>& shape, const std::string& act = "", const std::string& name = "");
Var transpose(const Var& x, const std::vector<int32_t>& perm, const std::string& name = "");
Var flatten(const Var& x, int32_t axis = 1, const std::string& name = "");
Var squeeze(const Var& x, const std::vector<int32_t>& axes, const std::string& name = "");
Var unsqueeze(const Var& x, const std::vector<int32_t>& axes, const std::string& name = "");
Var concat(const std::vector<Var>& input, int32_t axis = 0, const std::string& name = "");
// num > 0 splits evenly; otherwise `sections` (one may be -1).
std::vector<Var> split(const Var& input, int32_t num, const std::vector<int32_t>& sections = {}, int32_t dim = -1,
                       const std::string& name = "");

// ---- math, reduction and control layers (layers_math.cc) ----

Var exp(const Var& x, const std::string& name = "");
Var sqrt(const Var& x, const std::string& name = "");
Var cos(const Var& x, const std::string& name = "");
Var floor(const Var& x, const std::string& name = "");
Var ceil(const Var& x, const std::string& name = "");
Var abs(const Var& x, const std::string& name = "");
Var elementwise_max(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var elementwise_min(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
Var elementwise_pow(const Var& x, const Var& y, int32_t axis = -1, const std::string& act = "");
// Sums over `dim` (all dimensions when empty).
Var reduce_sum(const Var& input, const std::vector<int32_t>& dim = {}, bool keep_dim = false,
               const std::string& name = "");
Var reduce_mean(const Var& input, const std::vector<int32_t>& dim = {}, bool keep_dim = false,
                const std::string& name = "");
Var clip(const Var& x, float min, float max, const std::string& name = "");
Var clip_by_norm(const Var& x, float max_norm, const std::string& name = "");
Var cast(const Var& x, DataType dtype);
// x += value; in place by default (Fluid's increment layer).
Var increment(const Var& x, float value = 1.0f, bool in_place = true);
Var less_than(const Var& x, const Var& y, bool force_cpu = false);
Var logical_not(const Var& x, const std::string& name = "");
Var logical_and(const Var& x, const Var& y, const std::string& name = "");
// Copies `input` into `output` (a new temporary when `output` is invalid).
Var assign(const Var& input, Var output = Var());
Var merge_selected_rows(const Var& x, const std::string& name = "");
// Pools each sequence of a LoD input to one row: "sum", "average", "sqrt",
// "max", "first" or "last" (case-insensitive, as Fluid upper-cases it).
Var sequence_pool(const Var& input, const std::string& pool_type, bool is_test = false, float pad_value = 0.0f);
// Fluid's argument order. is_distributed: the table lives sharded on the
// pservers and its rows are prefetched (DistributeTranspiler).
Var embedding(const Var& input, std::vector<int64_t> size, bool is_sparse = false, bool is_distributed = false,
              int64_t padding_idx = -1, const ParamAttr& param_attr = {}, DataType dtype = DataType::kFloat32);
// A persistable global variable `name` (int64 [1] by default), created on
// first use and counted up by `step` at the start of every run.
Var autoincreased_step_counter(const std::string& counter_name = "@STEP_COUNTER@", int64_t begin = 1, int64_t step = 1);

}  // namespace layers

namespace nets {
// conv2d (with `act`) followed by pool2d, as fluid.nets.simple_img_conv_pool.
Var simple_img_conv_pool(const Var& input, int32_t num_filters, int32_t filter_size, int32_t pool_size,
                         int32_t pool_stride, int32_t pool_padding = 0, const std::string& pool_type = "max",
                         bool global_pooling = false, int32_t conv_stride = 1, int32_t conv_padding = 0,
                         int32_t conv_dilation = 1, int32_t conv_groups = 1, const ParamAttr& param_attr = {},
                         const ParamAttr& bias_attr = {}, const std::string& act = "", bool use_cudnn = true);
}  // namespace nets
}  // namespace oar
