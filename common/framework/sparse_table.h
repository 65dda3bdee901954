// SparseTable: a pserver's shard of a distributed lookup table — what Fluid
// declares as a SELECTED_ROWS parameter whose rows grow on first use. fp32
// rows of `width` values keyed by 64-bit id; a row that does not exist is
// created with the table's initializer the first time it is looked up or
// updated. The initial value of a row is a function of (seed, id) only, so it
// does not depend on which trainer touched the id first, or when.
//
// Rows live in fixed-size chunks that never move (a row pointer stays valid
// for the table's life) and an open-addressing index maps id → row. An
// accumulator table (Adagrad's Moment, ...) can *follow* a parameter table:
// it keeps no index of its own and holds row r of the parameter's row r, so
// a parameter with one accumulator costs rows × 2 × width floats plus one
// index.
//
// A SparseTable is a handle: copies share the same rows (as Tensor copies
// share a buffer), so a Variable holding one can be copied cheaply.
//
// Thread-safety: every method may be called concurrently. The index and the
// chunk list are guarded by a reader/writer lock; row *values* are read and
// written without a lock (Hogwild, as Fluid's pservers update their
// tables): a reader may see a row in the middle of an update.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace oar {

// How new rows are filled: Fluid's fill_constant / uniform_random /
// gaussian_random attributes, read from the startup program's initializer.
struct RowInitializer {
  enum class Kind { kConstant, kUniform, kGaussian };
  Kind kind = Kind::kConstant;
  float a = 0;  // value | min | mean
  float b = 0;  // —     | max | std
  uint64_t seed = 0;
};

class SparseTable {
 public:
  SparseTable();

  // Sets the row width (once rows exist it can no longer change).
  absl::Status Configure(int64_t width);
  void SetInitializer(const RowInitializer& init);
  // This table becomes an accumulator of `primary`: same rows, no index.
  absl::Status Follow(const SparseTable& primary);
  bool following() const;
  bool SameAs(const SparseTable& other) const { return impl_ == other.impl_; }

  int64_t width() const;
  int64_t size() const;             // rows that exist
  int64_t declared_height() const;  // the program's shape[0] (informational: ids are not bounded by it)
  void set_declared_height(int64_t h);

  // The row of `id`, created (initialized) when absent. Not on a follower.
  float* FindOrCreate(int64_t id);
  // The row of `id`, or nullptr.
  const float* Find(int64_t id) const;
  // A follower's row for its primary's row `row` of id `id`, created when absent.
  float* FollowerRow(int64_t row, int64_t id);
  // The primary's row index of `id` (created when absent); with the row.
  int64_t IndexOf(int64_t id, float** row);

  // The rows of ids[0..n) (created when absent) into rows[0..n), and their
  // row indices into index[0..n) when `index` is not null: two lock
  // acquisitions for the whole batch, not two per id.
  void FindOrCreateRows(const int64_t* ids, int64_t n, float** rows, int64_t* index = nullptr);
  // A follower's rows for its primary's rows index[0..n) of ids[0..n).
  void FollowerRows(const int64_t* index, const int64_t* ids, int64_t n, float** rows);

  // Copies the rows of ids[0..n) into out[n × width], creating absent ones.
  void Lookup(const int64_t* ids, int64_t n, float* out);
  // Every row in creation order: (id, values). Holds the table's lock:
  // `fn` must not call this table.
  void ForEach(const std::function<void(int64_t id, const float* row)>& fn) const;
  // Replaces the contents: rows of `ids` with `values` [n × width].
  absl::Status Assign(const std::vector<int64_t>& ids, const float* values);
  // Bytes held by rows and index (for the memory benchmark and logs).
  size_t MemoryBytes() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace oar
