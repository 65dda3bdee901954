// DDim: the dimensions of a tensor. At compile time a dimension may be -1
// (unknown, usually the batch); at run time all are known.
//
// Thread-safety: a value type; externally synchronized.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace oar {

class DDim {
 public:
  DDim() = default;
  DDim(std::initializer_list<int64_t> d) : d_(d) {}
  explicit DDim(const std::vector<int64_t>& d) : d_(d.begin(), d.end()) {}

  int size() const { return static_cast<int>(d_.size()); }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + d_.size(); }
  void push_back(int64_t v) { d_.push_back(v); }

  // Product of all dimensions (-1 if any is unknown; 1 for rank 0).
  int64_t numel() const;
  // Product of dimensions [begin, end).
  int64_t Product(int begin, int end) const;
  // Collapses to 2-D at `num_col_dims`: [prod(d[0:n]), prod(d[n:])].
  DDim FlattenTo2D(int num_col_dims) const;
  bool HasUnknown() const;
  std::vector<int64_t> ToVector() const { return {d_.begin(), d_.end()}; }
  // "[-1, 784]"
  std::string ToString() const;

  friend bool operator==(const DDim& a, const DDim& b) { return a.d_ == b.d_; }
  friend bool operator!=(const DDim& a, const DDim& b) { return !(a == b); }

 private:
  absl::InlinedVector<int64_t, 6> d_;
};

}  // namespace oar
