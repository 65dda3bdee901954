// A network with a distributed lookup table for the transpiler tests: two
// int64 id inputs `ids`, `ids2` looked up in one table "emb" [kTableRows, 8]
// (is_sparse, is_distributed), summed → fc(1) "w"/"b" → square error with
// `y` → mean; SGD(0.5), Adagrad(0.1) or Adam(0.05). `table_lr` multiplies the
// table's learning rate (ParamAttr.learning_rate).
//
// Thread-safety: test-only.
#pragma once

#include <string>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {

inline constexpr int64_t kTableRows = 4096;

struct TableNet {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;

  explicit TableNet(const std::string& opt = "sgd", bool distributed = true, float table_lr = 1.0f) {
    startup.set_random_seed(11);
    ProgramGuard g(&main, &startup);
    auto attr = [](const char* n) {
      ParamAttr a;
      a.name = n;
      return a;
    };
    ParamAttr table = attr("emb");
    table.learning_rate = table_lr;
    Var a =
        layers::embedding(layers::data("ids", {1}, DataType::kInt64), {kTableRows, 8}, true, distributed, -1, table);
    Var b =
        layers::embedding(layers::data("ids2", {1}, DataType::kInt64), {kTableRows, 8}, true, distributed, -1, table);
    Var pred = layers::fc(layers::elementwise_add(a, b), 1, "", attr("w"), attr("b"));
    loss = layers::mean(layers::square_error_cost(pred, layers::data("y", {1})));
    if (opt == "adagrad") {
      optimizer::Adagrad(0.1f).minimize(loss);
    } else if (opt == "adam") {
      optimizer::Adam(0.05f).minimize(loss);
    } else {
      optimizer::SGD(0.5f).minimize(loss);
    }
    EXPECT_TRUE(main.status().ok()) << main.status();
  }
};

}  // namespace oar
