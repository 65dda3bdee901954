// The two Paddle-written fixtures the data-layer tests train on a user's
// data (tests/paddle_fixtures/make_data_fixtures.py): the programs and
// Paddle's losses under tests/testdata/paddle/, the same examples as npy
// arrays and MultiSlot files under tests/testdata/paddle_data/.
//
// Thread-safety: constants.
#pragma once

#include <string>

#include "tests/util/build_paths.h"

namespace oar {

inline const std::string kMlp = TestdataDir() + "/paddle/mlp";                       // x [16, 64] per batch, label
inline const std::string kMlpData = TestdataDir() + "/paddle_data/mlp";              // npy/, arrays.npz
inline const std::string kCtr = TestdataDir() + "/paddle/fluid18_ctr_dnn";           // slot0..3 (LoD), dense, label
inline const std::string kCtrData = TestdataDir() + "/paddle_data/fluid18_ctr_dnn";  // data.desc, part-0, part-1
// ids [16, 1] per batch into a 20000 x 8 is_sparse embedding (sliced over 2
// pservers), label (tests/paddle_fixtures/make_sliced_table_fixture.py).
inline const std::string kSlicedTable = TestdataDir() + "/paddle/sliced_table";
inline const std::string kSlicedTableData = TestdataDir() + "/paddle_data/sliced_table";  // npy/

}  // namespace oar
