#include "common/base/flag_refusal.h"

#include <utility>

#include "absl/synchronization/mutex.h"

namespace oar {
namespace {

absl::Mutex& RefusalMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

std::string& Refusal() {
  static std::string* why = new std::string();
  return *why;
}

}  // namespace

bool RefuseFlagValue(std::string why) {
  absl::MutexLock lock(&RefusalMutex());
  Refusal() = std::move(why);
  return false;
}

std::string TakeFlagRefusal() {
  absl::MutexLock lock(&RefusalMutex());
  return std::exchange(Refusal(), std::string());
}

}  // namespace oar
