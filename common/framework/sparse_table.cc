#include "common/framework/sparse_table.h"

#include <cmath>
#include <cstring>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace oar {
namespace {

constexpr int64_t kChunkRows = 4096;

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// [0, 1) with 24 random bits: every value is exactly a float.
float Unit(uint64_t* state) { return static_cast<float>(SplitMix(state) >> 40) * (1.0f / 16777216.0f); }

void InitRow(const RowInitializer& init, int64_t id, int64_t width, float* row) {
  if (init.kind == RowInitializer::Kind::kConstant) {
    std::fill(row, row + width, init.a);
    return;
  }
  // A stream of its own per (seed, id).
  uint64_t state = init.seed ^ (static_cast<uint64_t>(id) * 0xD6E8FEB86659FD93ull);
  SplitMix(&state);
  if (init.kind == RowInitializer::Kind::kUniform) {
    for (int64_t k = 0; k < width; ++k) row[k] = init.a + (init.b - init.a) * Unit(&state);
    return;
  }
  for (int64_t k = 0; k < width; k += 2) {  // Box–Muller, two values per pair of uniforms
    const float u1 = 1.0f - Unit(&state), u2 = Unit(&state);
    const float r = std::sqrt(-2.0f * std::log(u1));
    row[k] = init.a + init.b * r * std::cos(6.2831853f * u2);
    if (k + 1 < width) row[k + 1] = init.a + init.b * r * std::sin(6.2831853f * u2);
  }
}

}  // namespace

struct SparseTable::Impl {
  mutable absl::Mutex mu;
  int64_t width ABSL_GUARDED_BY(mu) = 0;
  int64_t declared_height ABSL_GUARDED_BY(mu) = 0;
  RowInitializer init ABSL_GUARDED_BY(mu);
  std::vector<std::unique_ptr<float[]>> chunks ABSL_GUARDED_BY(mu);
  // A primary's index and ids by row; a follower's rows-made bits.
  absl::flat_hash_map<int64_t, int64_t> index ABSL_GUARDED_BY(mu);
  std::vector<int64_t> ids ABSL_GUARDED_BY(mu);
  std::shared_ptr<Impl> primary ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> made ABSL_GUARDED_BY(mu);

  float* RowLocked(int64_t row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const size_t c = static_cast<size_t>(row / kChunkRows);
    while (chunks.size() <= c) {
      chunks.push_back(std::unique_ptr<float[]>(new float[static_cast<size_t>(kChunkRows * width)]));
    }
    return chunks[c].get() + (row % kChunkRows) * width;
  }
  const float* RowIfAllocated(int64_t row) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    const size_t c = static_cast<size_t>(row / kChunkRows);
    return c < chunks.size() ? chunks[c].get() + (row % kChunkRows) * width : nullptr;
  }
  int64_t CreateLocked(int64_t id, float** out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int64_t row = static_cast<int64_t>(ids.size());
    float* p = RowLocked(row);
    InitRow(init, id, width, p);
    ids.push_back(id);
    index.emplace(id, row);
    *out = p;
    return row;
  }
};

SparseTable::SparseTable() : impl_(std::make_shared<Impl>()) {}

absl::Status SparseTable::Configure(int64_t width) {
  absl::MutexLock l(&impl_->mu);
  if (width <= 0) return absl::InvalidArgumentError(absl::StrCat("sparse table: width ", width, " must be > 0"));
  if (impl_->width == width) return absl::OkStatus();
  if (!impl_->chunks.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sparse table: rows of width ", impl_->width, " exist, cannot change it to ", width));
  }
  impl_->width = width;
  return absl::OkStatus();
}

void SparseTable::SetInitializer(const RowInitializer& init) {
  absl::MutexLock l(&impl_->mu);
  impl_->init = init;
  if (init.kind != RowInitializer::Kind::kConstant && init.seed == 0) {  // Fluid: seed 0 is "any seed"
    impl_->init.seed = std::random_device{}();
  }
}

absl::Status SparseTable::Follow(const SparseTable& primary) {
  if (primary.impl_ == impl_) return absl::InvalidArgumentError("sparse table: a table cannot follow itself");
  int64_t pw;
  {
    absl::ReaderMutexLock l(&primary.impl_->mu);
    if (primary.impl_->primary != nullptr) return absl::InvalidArgumentError("sparse table: cannot follow a follower");
    pw = primary.impl_->width;
  }
  absl::MutexLock l(&impl_->mu);
  if (impl_->primary == primary.impl_) return absl::OkStatus();
  if (impl_->primary != nullptr || !impl_->ids.empty() || !impl_->chunks.empty()) {
    return absl::FailedPreconditionError("sparse table: already holds rows or follows another table");
  }
  if (impl_->width == 0) impl_->width = pw;
  if (impl_->width != pw) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse table: width ", impl_->width, " cannot follow a table of width ", pw));
  }
  impl_->primary = primary.impl_;
  return absl::OkStatus();
}

bool SparseTable::following() const {
  absl::ReaderMutexLock l(&impl_->mu);
  return impl_->primary != nullptr;
}

int64_t SparseTable::width() const {
  absl::ReaderMutexLock l(&impl_->mu);
  return impl_->width;
}

int64_t SparseTable::size() const {
  std::shared_ptr<Impl> p;
  {
    absl::ReaderMutexLock l(&impl_->mu);
    if (impl_->primary == nullptr) return static_cast<int64_t>(impl_->ids.size());
    p = impl_->primary;
  }
  absl::ReaderMutexLock l(&p->mu);
  return static_cast<int64_t>(p->ids.size());
}

int64_t SparseTable::declared_height() const {
  absl::ReaderMutexLock l(&impl_->mu);
  return impl_->declared_height;
}

void SparseTable::set_declared_height(int64_t h) {
  absl::MutexLock l(&impl_->mu);
  impl_->declared_height = h;
}

float* SparseTable::FindOrCreate(int64_t id) {
  float* row = nullptr;
  IndexOf(id, &row);
  return row;
}

int64_t SparseTable::IndexOf(int64_t id, float** row) {
  int64_t index = 0;
  FindOrCreateRows(&id, 1, row, &index);
  return index;
}

const float* SparseTable::Find(int64_t id) const {
  absl::ReaderMutexLock l(&impl_->mu);
  auto it = impl_->index.find(id);
  return it == impl_->index.end() ? nullptr : impl_->RowIfAllocated(it->second);
}

float* SparseTable::FollowerRow(int64_t row, int64_t id) {
  float* p = nullptr;
  FollowerRows(&row, &id, 1, &p);
  return p;
}

void SparseTable::FindOrCreateRows(const int64_t* ids, int64_t n, float** rows, int64_t* index) {
  Impl& m = *impl_;
  std::vector<int64_t> missing;
  {
    absl::ReaderMutexLock l(&m.mu);
    for (int64_t i = 0; i < n; ++i) {
      auto it = m.index.find(ids[i]);
      if (it == m.index.end()) {
        missing.push_back(i);
        continue;
      }
      rows[i] = const_cast<float*>(m.RowIfAllocated(it->second));
      if (index != nullptr) index[i] = it->second;
    }
  }
  if (missing.empty()) return;
  absl::MutexLock l(&m.mu);
  for (int64_t i : missing) {  // made meanwhile, or listed twice in this batch: found now
    auto it = m.index.find(ids[i]);
    const int64_t r = it != m.index.end() ? it->second : m.CreateLocked(ids[i], &rows[i]);
    rows[i] = m.RowLocked(r);
    if (index != nullptr) index[i] = r;
  }
}

void SparseTable::FollowerRows(const int64_t* index, const int64_t* ids, int64_t n, float** rows) {
  Impl& m = *impl_;
  std::vector<int64_t> missing;
  {
    absl::ReaderMutexLock l(&m.mu);
    for (int64_t i = 0; i < n; ++i) {
      const size_t word = static_cast<size_t>(index[i] / 64);
      if (word < m.made.size() && (m.made[word] & (uint64_t{1} << (index[i] % 64)))) {
        rows[i] = const_cast<float*>(m.RowIfAllocated(index[i]));
      } else {
        missing.push_back(i);
      }
    }
  }
  if (missing.empty()) return;
  absl::MutexLock l(&m.mu);
  for (int64_t i : missing) {
    const int64_t row = index[i];
    const size_t word = static_cast<size_t>(row / 64);
    const uint64_t bit = uint64_t{1} << (row % 64);
    float* p = m.RowLocked(row);
    if (m.made.size() <= word) m.made.resize(word + 1 + word / 2, 0);
    if (!(m.made[word] & bit)) {
      InitRow(m.init, ids[i], m.width, p);
      m.made[word] |= bit;
    }
    rows[i] = p;
  }
}

void SparseTable::Lookup(const int64_t* ids, int64_t n, float* out) {
  const int64_t w = width();
  std::vector<float*> rows(static_cast<size_t>(n));
  FindOrCreateRows(ids, n, rows.data());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * w, rows[static_cast<size_t>(i)], sizeof(float) * static_cast<size_t>(w));
}

void SparseTable::ForEach(const std::function<void(int64_t, const float*)>& fn) const {
  std::shared_ptr<Impl> primary;
  {
    absl::ReaderMutexLock l(&impl_->mu);
    primary = impl_->primary;
  }
  if (primary == nullptr) {
    absl::ReaderMutexLock l(&impl_->mu);
    for (size_t r = 0; r < impl_->ids.size(); ++r) fn(impl_->ids[r], impl_->RowIfAllocated(static_cast<int64_t>(r)));
    return;
  }
  // A follower: the primary's ids, each with this table's row (its
  // initial value where the accumulator was never touched).
  std::vector<int64_t> ids;
  {
    absl::ReaderMutexLock l(&primary->mu);
    ids = primary->ids;
  }
  SparseTable self = *this;
  for (size_t r = 0; r < ids.size(); ++r) fn(ids[r], self.FollowerRow(static_cast<int64_t>(r), ids[r]));
}

absl::Status SparseTable::Assign(const std::vector<int64_t>& ids, const float* values) {
  std::shared_ptr<Impl> primary;
  int64_t w;
  {
    absl::MutexLock l(&impl_->mu);
    primary = impl_->primary;
    w = impl_->width;
    if (w <= 0) return absl::FailedPreconditionError("sparse table: width not set");
    if (primary == nullptr) {
      impl_->index.clear();
      impl_->ids.clear();
      impl_->index.reserve(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!impl_->index.emplace(ids[i], static_cast<int64_t>(i)).second) {
          return absl::InvalidArgumentError(absl::StrCat("sparse table: id ", ids[i], " is listed twice"));
        }
        impl_->ids.push_back(ids[i]);
        std::memcpy(impl_->RowLocked(static_cast<int64_t>(i)), values + i * static_cast<size_t>(w),
                    sizeof(float) * static_cast<size_t>(w));
      }
      return absl::OkStatus();
    }
  }
  // A follower: each id's row of the primary (created when absent).
  SparseTable p;
  p.impl_ = primary;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* unused = nullptr;
    const int64_t r = p.IndexOf(ids[i], &unused);
    std::memcpy(FollowerRow(r, ids[i]), values + i * static_cast<size_t>(w), sizeof(float) * static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

size_t SparseTable::MemoryBytes() const {
  absl::ReaderMutexLock l(&impl_->mu);
  return impl_->chunks.size() * static_cast<size_t>(kChunkRows * impl_->width) * sizeof(float) +
         impl_->index.capacity() * (sizeof(std::pair<int64_t, int64_t>) + 1) + impl_->ids.capacity() * sizeof(int64_t) +
         impl_->made.capacity() * sizeof(uint64_t);
}

}  // namespace oar
