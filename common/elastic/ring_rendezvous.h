// NextRingGeneration: how the trainers of an elastic nccl2 job agree,
// through etcd, on who forms the next ring. A generation is a number and the
// sorted ids of its trainers (a trainer's rank is its place in that list),
// kept under one key:
//   /oar/<job>/ring/gen            = "<number> forming|sealed <id>,<id>,..."
//   /oar/<job>/ring/ready/<n>/<id> = the trainer's member value ("host pid N"),
//                                    under its lease
// A trainer that needs a ring newer than `after` (its ring broke, the
// members changed at a commit, or it has just joined):
//  - finds the key sealed and naming it, with its own ready key, and newer
//    than `after`: that generation is its next ring;
//  - else, when the key is sealed (older, or without it) or forming with a
//    trainer that is no longer live or without it, proposes <number + 1>
//    forming with every live trainer (a compare-and-put on the key, so of
//    several proposals one wins and the others read it);
//  - else (forming, with it, every trainer live) says it is ready; the
//    trainer that sees every listed trainer ready seals the generation
//    (another compare-and-put), unless they are fewer than the job's MIN.
// Only a sealed generation is ever used, and it cannot change once sealed,
// so every trainer that returns a number returns the same list for it.
// A trainer the generation waits on is out (not live: the next proposal
// leaves it out) once its entry goes:
//  - its lease ran out (it died, or was cut off), or was revoked;
//  - or it was in the ring this trainer left and has not said ready
//    `silence` after this trainer left (or at all, when the ring's own
//    wait timed out on it: Left::silent). Every live, working trainer of a
//    ring leaves it within a step of the others (a broken ring fails each
//    member's next collective; a change of members is all-reduced at a
//    commit), so it is lost or stuck, and its lease is revoked — if its
//    entry is still the process that said ready to that ring, and that
//    process has not said ready to a later generation (a trainer back from
//    a stop finds its ring-mates gone on without it, and leaves them be).
//    A joiner never takes out the trainers it waits on: they train on to
//    their commit.
//
//   OAR_ASSIGN_OR_RETURN(RingGeneration g, NextRingGeneration(etcd, {.job = "j", .trainer = 1, ...}, 0, T));
//
// Thread-safety: a plain function; the client is safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/elastic/etcd_client.h"

namespace oar::elastic {

struct RingGeneration {
  int64_t number = 0;
  std::vector<int> trainers;  // sorted ids; rank = index
  // This trainer's rank, or -1.
  int RankOf(int trainer) const;
};

struct RendezvousOptions {
  std::string job;
  int trainer = 0;
  std::string value;  // this process's member value: its ready key says which process is ready
  // Its lease now (its ready keys go with it): a trainer cut off past its
  // lease registers again under a new one. Unset: no lease.
  std::function<int64_t()> lease;
  int min_trainers = 1;
  // The job's live trainer ids; unset: the trainer entries of etcd's member
  // list (membership.h).
  std::function<absl::StatusOr<std::set<int>>()> live;
  absl::Duration poll = absl::Milliseconds(20);
  // The ring this trainer just left (it broke, or its members changed);
  // unset for its first ring.
  struct Left {
    int64_t number = 0;
    std::vector<int> trainers;
    absl::Time at;
    // Its trainers that its broken collective waited on for the whole
    // timeout (Collective::Unanswered): silent that long already, they are
    // taken out at once, not `silence` later.
    std::vector<int> silent;
  };
  std::optional<Left> left;
  absl::Duration silence = absl::InfiniteDuration();
};

// The next sealed generation newer than `after` that holds this trainer,
// waiting up to `timeout` (DeadlineExceeded naming what it waited for: the
// trainers not yet ready, or MIN).
absl::StatusOr<RingGeneration> NextRingGeneration(EtcdClient* etcd, const RendezvousOptions& options, int64_t after,
                                                  absl::Duration timeout);

// The live trainer ids in `job`'s member list.
absl::StatusOr<std::set<int>> LiveTrainers(EtcdClient* etcd, const std::string& job);

}  // namespace oar::elastic
