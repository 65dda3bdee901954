// EtcdClient: Oar's client of a real etcd-server through its v3 gRPC API
// (proto/etcd_rpc.proto: etcd's own services and field numbers) — keys,
// prefixes, create-if-absent transactions, leases and watches: what an
// elastic job keeps its membership and its data tasks in.
//
//   OAR_ASSIGN_OR_RETURN(auto etcd, EtcdClient::Connect("etcd://127.0.0.1:2379", absl::Seconds(5)));
//   OAR_ASSIGN_OR_RETURN(int64_t lease, etcd->GrantLease(absl::Seconds(10)));
//   OAR_RETURN_IF_ERROR(etcd->Put("/oar/job/members/trainer/1", "127.0.0.1:7164", lease).status());
//   auto watch = etcd->WatchPrefix("/oar/job/members/", range.revision + 1, on_events);
//
// Every call is bounded by the client's timeout, and made again within it
// when the connection broke under it (etcd restarting): a create, replace
// or move then checks whether its first try was applied. gRPC's codes
// become Status here, naming the server and what was asked (UNAVAILABLE:
// etcd cannot be reached; NOT_FOUND from KeepAlive: the lease has expired).
//
// Thread-safety: calls may come from any number of threads (gRPC's stubs
// are thread-safe). An EtcdWatch calls its callback on its own thread; its
// destructor cancels the watch and joins that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace oar::elastic {

struct EtcdKv {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, lease = 0;
};

// What a range read returns: the keys and the store's revision at the read
// (a watch from revision + 1 misses nothing after it).
struct EtcdRange {
  std::vector<EtcdKv> kvs;
  int64_t revision = 0;
};

struct EtcdEvent {
  bool deleted = false;  // else a put
  EtcdKv kv;             // a delete's: the key and its mod revision
};

class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
};

class EtcdClient {
 public:
  // "etcd://HOST:PORT" (or "HOST:PORT"); nothing is sent until the first call.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const std::string& url, absl::Duration timeout);
  ~EtcdClient();

  const std::string& endpoint() const { return endpoint_; }

  // The store's revision after the put.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Puts `key` only if it does not exist (a transaction on its create
  // revision): true when this call created it.
  absl::StatusOr<bool> Create(const std::string& key, const std::string& value, int64_t lease = 0);
  // Replaces `key`'s value only if it still has `mod_revision`: true when it did.
  absl::StatusOr<bool> CompareAndPut(const std::string& key, int64_t mod_revision, const std::string& value,
                                     int64_t lease = 0);
  // Moves a key: if `from` holds `expected`, puts `to` = `value` (no lease)
  // and deletes `from`, in one transaction; true when it did.
  absl::StatusOr<bool> MoveIf(const std::string& from, const std::string& expected, const std::string& to,
                              const std::string& value);
  // Puts `key` = `value` under `lease` only if neither `key` nor `unless`
  // exists, and with it `record` = `value` (no lease), in one transaction
  // (a chunk's claim: TaskQueue::Take). nullopt when it put nothing; else
  // what `record` held before ("" when it had no value, or when a retry cut
  // off the first try's answer).
  absl::StatusOr<std::optional<std::string>> CreateUnless(const std::string& key, const std::string& unless,
                                                          const std::string& value, int64_t lease,
                                                          const std::string& record);
  absl::StatusOr<EtcdRange> Get(const std::string& key);
  absl::StatusOr<EtcdRange> GetPrefix(const std::string& prefix);
  // How many keys it deleted.
  absl::StatusOr<int64_t> Delete(const std::string& key);
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix);

  // A lease of `ttl` (whole seconds, at least 1; etcd may grant more): its
  // id. Keys put with it go when it expires or is revoked.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews the lease once; NotFound when it has already expired.
  absl::Status KeepAlive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // Every put and delete under `prefix` from `start_revision` on (0: from
  // now), in order, on the watch's thread. `on_end` is told once why the
  // watch ended (the server went away, the revision was compacted); not
  // when the watch is destroyed.
  using EventsFn = std::function<void(const std::vector<EtcdEvent>& events, int64_t revision)>;
  using EndFn = std::function<void(const absl::Status& why)>;
  absl::StatusOr<std::unique_ptr<EtcdWatch>> WatchPrefix(const std::string& prefix, int64_t start_revision,
                                                         EventsFn on_events, EndFn on_end);

 private:
  struct Stubs;
  EtcdClient(std::string endpoint, absl::Duration timeout, std::unique_ptr<Stubs> stubs);
  // Whether `key` holds `value` under `lease`.
  absl::StatusOr<bool> Holds(const std::string& key, const std::string& value, int64_t lease);

  std::string endpoint_;
  absl::Duration timeout_;
  std::unique_ptr<Stubs> stubs_;
};

// The end of the range holding every key that starts with `prefix` (etcd's
// convention: the prefix with its last byte below 0xff incremented).
std::string PrefixEnd(const std::string& prefix);

}  // namespace oar::elastic
