#include "trainer/collective/inprocess_collective.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "trainer/collective/reduce.h"

namespace oar {

absl::Status ReduceSlice(const std::vector<Tensor*>& bufs, size_t home, int64_t lo, int64_t hi) {
  if (hi <= lo) return absl::OkStatus();
  const DataType dt = bufs[home]->dtype();
  const size_t es = SizeOf(dt);
  char* dst = static_cast<char*>(bufs[home]->raw_data()) + static_cast<size_t>(lo) * es;
  for (size_t p = 0; p < bufs.size(); ++p) {
    if (p == home) continue;
    const char* src = static_cast<const char*>(bufs[p]->raw_data()) + static_cast<size_t>(lo) * es;
    OAR_RETURN_IF_ERROR(SumInto(dt, dst, src, static_cast<size_t>(hi - lo)));
  }
  return absl::OkStatus();
}

void CopySlice(const std::vector<Tensor*>& bufs, size_t from, int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  const size_t es = SizeOf(bufs[from]->dtype());
  const char* src = static_cast<const char*>(bufs[from]->raw_data()) + static_cast<size_t>(lo) * es;
  for (size_t p = 0; p < bufs.size(); ++p) {
    if (p != from)
      std::memcpy(static_cast<char*>(bufs[p]->raw_data()) + static_cast<size_t>(lo) * es, src,
                  static_cast<size_t>(hi - lo) * es);
  }
}

class InProcessRank : public Collective {
 public:
  InProcessRank(InProcessGroup* g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size_; }
  std::string backend() const override { return "in-process"; }
  absl::Status AllReduce(Tensor* t, const std::string& name) override {
    return g_->Run(rank_, {.op = InProcessGroup::Op::kAllReduce, .name = name, .inout = t}, nullptr);
  }
  absl::Status Broadcast(Tensor* t, int root, const std::string& name) override {
    return g_->Run(rank_, {.op = InProcessGroup::Op::kBroadcast, .name = name, .inout = t, .root = root}, nullptr);
  }
  absl::Status AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) override {
    return g_->Run(rank_, {.op = InProcessGroup::Op::kAllGather, .name = name, .in = &in}, out);
  }
  absl::Status Barrier() override { return g_->Run(rank_, {.op = InProcessGroup::Op::kBarrier, .name = ""}, nullptr); }

 private:
  InProcessGroup* g_;
  int rank_;
};

InProcessGroup::InProcessGroup(int size, absl::Duration timeout) : size_(size), timeout_(timeout) {
  absl::MutexLock l(&mu_);
  slots_.resize(static_cast<size_t>(size));
  arrivals_.assign(static_cast<size_t>(size), 0);
}

InProcessGroup::~InProcessGroup() = default;

std::unique_ptr<Collective> InProcessGroup::Rank(int r) { return std::make_unique<InProcessRank>(this, r); }

absl::Status InProcessGroup::Await(int rank, const char* what, const std::string& name) {
  const int64_t target = ++arrivals_[static_cast<size_t>(rank)];
  struct Ready {
    InProcessGroup* g;
    int64_t target;
  } ready{this, target};
  const bool met = mu_.AwaitWithTimeout(absl::Condition(
                                            +[](Ready* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                              if (!r->g->broken_.ok()) return true;
                                              for (int64_t a : r->g->arrivals_) {
                                                if (a < r->target) return false;
                                              }
                                              return true;
                                            },
                                            &ready),
                                        timeout_);
  if (!broken_.ok()) return broken_;
  if (!met) {
    std::vector<int> missing;
    for (int q = 0; q < size_; ++q) {
      if (arrivals_[static_cast<size_t>(q)] < target) missing.push_back(q);
    }
    broken_ = absl::DeadlineExceededError(
        absl::StrCat(what, " '", name, "': ", missing.size() == 1 ? "rank " : "ranks ", absl::StrJoin(missing, ", "),
                     " did not arrive within ", absl::FormatDuration(timeout_)));
    return broken_;
  }
  return absl::OkStatus();
}

absl::Status InProcessGroup::Run(int rank, Slot slot, std::vector<Tensor>* gathered) {
  static const char* kNames[] = {"AllReduce", "Broadcast", "AllGather", "Barrier"};
  const char* what = kNames[static_cast<int>(slot.op)];
  const std::string name = slot.name;
  if (slot.inout != nullptr) {
    slot.dtype = slot.inout->dtype();
    slot.numel = slot.inout->numel();
  }
  std::vector<Slot> all;
  {
    absl::MutexLock l(&mu_);
    if (!broken_.ok()) return broken_;
    slots_[static_cast<size_t>(rank)] = slot;
    OAR_RETURN_IF_ERROR(Await(rank, what, name));
    all = slots_;
  }
  // Every rank checks every slot the same way, so all fail alike.
  for (int q = 0; q < size_; ++q) {
    const Slot& s = all[static_cast<size_t>(q)];
    bool same = s.op == all[0].op && s.name == all[0].name && s.root == all[0].root;
    if (same && s.numel >= 0 && all[0].numel >= 0) same = s.dtype == all[0].dtype && s.numel == all[0].numel;
    if (!same) {
      auto describe = [&](int r) {
        const Slot& x = all[static_cast<size_t>(r)];
        return absl::StrCat(kNames[static_cast<int>(x.op)], " '", x.name, "'",
                            x.numel >= 0 ? absl::StrCat(" ", DataTypeName(x.dtype), "[", x.numel, "]") : "");
      };
      const absl::Status mismatch = absl::InvalidArgumentError(
          absl::StrCat("collective calls disagree: rank 0 ", describe(0), ", rank ", q, " ", describe(q)));
      // Every rank found it: all leave together, so that none deposits its
      // next call while another still reads this round's slots.
      absl::MutexLock l(&mu_);
      (void)Await(rank, what, name);
      return mismatch;
    }
  }
  std::vector<Tensor*> bufs;
  for (const Slot& s : all) bufs.push_back(s.inout);
  absl::Status work;
  if (slot.op == Op::kAllReduce) {
    const int64_t n = slot.inout->numel();
    auto lo = [&](int r) { return n * r / size_; };
    work = ReduceSlice(bufs, static_cast<size_t>(rank), lo(rank), lo(rank + 1));
    {
      absl::MutexLock l(&mu_);
      OAR_RETURN_IF_ERROR(Await(rank, what, name));
    }
    for (int q = 0; q < size_ && work.ok(); ++q) {
      if (q != rank) {  // slice q from its owner
        const size_t es = SizeOf(slot.inout->dtype());
        std::memcpy(static_cast<char*>(slot.inout->raw_data()) + lo(q) * es,
                    static_cast<const char*>(bufs[static_cast<size_t>(q)]->raw_data()) + lo(q) * es,
                    static_cast<size_t>(lo(q + 1) - lo(q)) * es);
      }
    }
  } else if (slot.op == Op::kBroadcast && rank != slot.root) {
    const Tensor* src = bufs[static_cast<size_t>(slot.root)];
    if (src->numel() > 0) std::memcpy(slot.inout->raw_data(), src->raw_data(), src->nbytes());
  } else if (slot.op == Op::kAllGather) {
    gathered->assign(static_cast<size_t>(size_), Tensor());
    for (int q = 0; q < size_; ++q) (*gathered)[static_cast<size_t>(q)].CopyFrom(*all[static_cast<size_t>(q)].in);
  }
  // No rank leaves while another reads its buffer or this round's slots (a
  // barrier too: a rank that left early could deposit its next call over a
  // slot another rank has not read yet).
  absl::MutexLock l(&mu_);
  OAR_RETURN_IF_ERROR(Await(rank, what, name));
  if (!work.ok()) broken_ = work;
  return work;
}

}  // namespace oar
