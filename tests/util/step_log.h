// What the e2e tests compare: each trainer's per-step losses (the files
// --step_log / --step_log_dir write, one %.9g loss a line), and the small
// fashion_mlp run they train (the same data, order and seeded random
// initial values everywhere, plain SGD, so runs that must agree can; random
// rather than constant, so hidden units differ and a wrong row or column
// shows).
//
// Thread-safety: test-only.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace oar {

inline const std::string kSmallRun =
    "--model fashion_mlp --limit 2000 --batch_size 64 --seed 3 --optimizer sgd --lr 0.01";

inline std::vector<double> ReadSteps(const std::string& path) {
  std::vector<double> out;
  std::ifstream f(path);
  for (double v; f >> v;) out.push_back(v);
  return out;
}

}  // namespace oar
