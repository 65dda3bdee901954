// Fluid's PS dispatchers: which pserver endpoint each variable block goes
// to. RoundRobin hands out endpoints in turn (reset() restarts the turn);
// HashName places block 0 of variable v on endpoint hash(v) % n and block i
// on the i-th endpoint after it. Unlike Fluid's (Python's per-process salted
// hash() of each block name), the hash is fixed (FNV-1a), so every process
// of a job computes the same placement, and the blocks of one variable never
// share a pserver (a variable has at most n blocks).
//
// Thread-safety: a dispatcher is used by one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace oar {

class PSDispatcher {
 public:
  explicit PSDispatcher(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {}
  virtual ~PSDispatcher() = default;
  // One endpoint per name, in order.
  virtual std::vector<std::string> Dispatch(const std::vector<std::string>& names) = 0;
  virtual void Reset() {}
  const std::vector<std::string>& endpoints() const { return endpoints_; }

 protected:
  std::vector<std::string> endpoints_;
};

class RoundRobin : public PSDispatcher {
 public:
  using PSDispatcher::PSDispatcher;
  std::vector<std::string> Dispatch(const std::vector<std::string>& names) override;
  void Reset() override { step_ = 0; }

 private:
  size_t step_ = 0;
};

class HashName : public PSDispatcher {
 public:
  using PSDispatcher::PSDispatcher;
  std::vector<std::string> Dispatch(const std::vector<std::string>& names) override;
};

// FNV-1a, 64 bits.
uint64_t StableHash(const std::string& s);

}  // namespace oar
