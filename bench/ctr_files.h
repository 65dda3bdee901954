// ctr_dnn's MultiSlot files for the benches (ctr_bench's AsyncExecutor
// section, feed_bench): random lines in the layout `oar gen-ctr-data`
// writes, and the DataFeedDesc that reads them.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/data/data_feed_desc.h"
#include "examples/model_zoo.h"
#include "glog/logging.h"

namespace oar::bench {

// `n` lines of ctr_dnn's slots: dense (13 floats), C1..C26 (1-3 ids below
// the table's rows), label.
inline void WriteCtrFile(const std::string& path, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::ofstream out(path);
  std::string line;
  for (int64_t i = 0; i < n; ++i) {
    line = absl::StrCat(kCtrDenseFeatures);
    for (int k = 0; k < kCtrDenseFeatures; ++k) absl::StrAppend(&line, " ", static_cast<float>(rng() % 1000) / 1000.0f);
    for (int s = 0; s < kCtrSparseSlots; ++s) {
      const int c = 1 + static_cast<int>(rng() % 3);
      absl::StrAppend(&line, " ", c);
      for (int k = 0; k < c; ++k) absl::StrAppend(&line, " ", rng() % static_cast<uint64_t>(kCtrSparseFeatureDim));
    }
    absl::StrAppend(&line, " 1 ", rng() % 2, "\n");
    out << line;
  }
}

inline DataFeedDesc CtrDesc(int batch_size) {
  std::string text = absl::StrCat("batch_size: ", batch_size, " multi_slot_desc {");
  absl::StrAppend(&text, " slots { name: '", kCtrDenseSlot, "' type: 'float' is_dense: true is_used: true shape: [-1, ",
                  kCtrDenseFeatures, "] }");
  for (int s = 1; s <= kCtrSparseSlots; ++s)
    absl::StrAppend(&text, " slots { name: 'C", s, "' type: 'uint64' is_used: true }");
  text += " slots { name: 'label' type: 'uint64' is_used: true } }";
  auto d = DataFeedDesc::Parse(text);
  CHECK(d.ok()) << d.status();
  return *d;
}

}  // namespace oar::bench
