#include "cli/elastic_launch.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/command.h"
#include "common/base/listen_sockets.h"
#include "common/base/status.h"
#include "common/elastic/membership.h"
#include "gflags/gflags.h"

DEFINE_bool(elastic, false,
            "an elastic job (--trainers MIN:MAX; pserver mode, sync or async, or nccl2 mode): trainers may die or join "
            "without stopping the job, their membership and data in etcd (oar launch runs an etcd-server unless "
            "--elastic_server "
            "names one; oar deploy writes an etcd StatefulSet and the trainers as a scalable StatefulSet)");
DEFINE_string(
    chaos, "",
    "with --elastic: kill (SIGKILL), stop (SIGTERM), freeze (SIGSTOP: a machine that stopped answering), "
    "thaw (SIGCONT) and add trainers as the job runs, e.g. 'kill trainer 1 at step 200; stop trainer 2 at step 300; "
    "freeze trainer 0 at step 350; add 1 at step 400' (a step: one trainer's step, counted over all "
    "trainers)");

namespace oar::cli {
namespace {

// "kill trainer 1 at step 200" / "stop ..." / "freeze ..." / "add 2 at step 400".
std::optional<ChaosEvent> ParseClause(absl::string_view clause) {
  std::vector<absl::string_view> w = absl::StrSplit(clause, ' ', absl::SkipWhitespace());
  ChaosEvent e;
  e.text = std::string(absl::StripAsciiWhitespace(clause));
  size_t at = 0;
  const std::map<absl::string_view, ChaosEvent::Kind> to_trainer = {{"kill", ChaosEvent::Kind::kKill},
                                                                    {"stop", ChaosEvent::Kind::kStop},
                                                                    {"freeze", ChaosEvent::Kind::kFreeze},
                                                                    {"thaw", ChaosEvent::Kind::kThaw}};
  if (w.size() == 6 && to_trainer.count(w[0]) && w[1] == "trainer" && absl::SimpleAtoi(w[2], &e.trainer)) {
    e.kind = to_trainer.at(w[0]);
    at = 3;
  } else if (w.size() == 5 && w[0] == "add" && absl::SimpleAtoi(w[1], &e.count) && e.count > 0) {
    e.kind = ChaosEvent::Kind::kAdd;
    at = 2;
  } else {
    return std::nullopt;
  }
  if (w[at] != "at" || w[at + 1] != "step" || !absl::SimpleAtoi(w[at + 2], &e.at_step) || e.at_step < 0) {
    return std::nullopt;
  }
  return e;
}

}  // namespace

absl::StatusOr<std::vector<ChaosEvent>> ParseChaos(absl::string_view text, int max_trainers) {
  std::vector<ChaosEvent> out;
  std::vector<std::string> bad;
  for (absl::string_view clause : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    std::optional<ChaosEvent> e = ParseClause(clause);
    if (!e.has_value()) {
      bad.push_back(absl::StrCat("'", absl::StripAsciiWhitespace(clause), "'"));
    } else if (e->kind != ChaosEvent::Kind::kAdd && (e->trainer < 0 || e->trainer >= max_trainers)) {
      bad.push_back(absl::StrCat("'", e->text, "' (trainer ids are 0..", max_trainers - 1, ")"));
    } else {
      out.push_back(*e);
    }
  }
  if (!bad.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--chaos: cannot read ", absl::StrJoin(bad, ", "),
                                                   "; each clause is 'kill trainer ID at step S', 'stop trainer ID at "
                                                   "step S', 'freeze trainer ID at step S', 'thaw trainer ID at step "
                                                   "S' or 'add N at step S', separated by ';'"));
  }
  return out;
}

absl::StatusOr<bool> ElasticLaunchRequested() {
  if (!FLAGS_elastic && !FLAGS_chaos.empty()) {
    return absl::InvalidArgumentError("--chaos kills and adds trainers of an elastic job: add --elastic");
  }
  return FLAGS_elastic;
}

absl::StatusOr<std::vector<ChaosEvent>> ChaosFromFlag(int max_trainers) {
  return ParseChaos(FLAGS_chaos, max_trainers);
}

absl::Status ForgetDeadTrainer(elastic::EtcdClient* etcd, const std::string& job, int trainer, pid_t pid) {
  const std::string its_pid = absl::StrCat(" pid ", pid);
  OAR_ASSIGN_OR_RETURN(const bool revoked,
                       elastic::Membership::RevokeIf(etcd, job, absl::StrCat("trainer/", trainer),
                                                     [&](const std::string& v) { return absl::EndsWith(v, its_pid); }));
  if (!revoked) return absl::OkStatus();
  std::fprintf(stderr,
               "oar launch: trainer %d (pid %d) is gone: its membership in etcd revoked (its chunk, if any, goes back "
               "to the queue)\n",
               trainer, static_cast<int>(pid));
  return absl::OkStatus();
}

absl::StatusOr<ChildSpec> RespawnSpec(ChildSpec s, const std::string& name, bool metrics) {
  for (auto& a : s.argv) a = absl::StrReplaceAll(a, {{"/" + s.name + ".", "/" + name + "."}});
  s.argv.erase(std::remove_if(s.argv.begin(), s.argv.end(),
                              [](const std::string& a) { return a.rfind("--metrics_port=", 0) == 0; }),
               s.argv.end());
  s.listen_fds.clear();
  if (metrics) {
    int port = 0;
    OAR_ASSIGN_OR_RETURN(const int fd, ListenOnLoopback(&port));
    s.listen_fds.push_back(fd);
    s.argv.push_back(absl::StrCat("--metrics_port=", port));
    std::fprintf(stderr, "oar launch: metrics: %s http://127.0.0.1:%d/metrics\n", name.c_str(), port);
  }
  s.name = name;
  return s;
}

ChaosRunner::ChaosRunner(std::vector<ChaosEvent> events, int max_trainers, Hooks hooks)
    : events_(std::move(events)), fired_(events_.size(), false), max_trainers_(max_trainers), hooks_(std::move(hooks)) {
  std::stable_sort(events_.begin(), events_.end(),
                   [](const ChaosEvent& a, const ChaosEvent& b) { return a.at_step < b.at_step; });
}

absl::Status ChaosRunner::Tick(int64_t job_steps) {
  for (size_t i = 0; i < events_.size(); ++i) {
    const ChaosEvent& e = events_[i];
    if (fired_[i] || job_steps < e.at_step) continue;
    std::string what;
    if (e.kind != ChaosEvent::Kind::kAdd) {
      struct Act {
        int signal;
        const char *name, *done, *verb;
      };
      const Act act = e.kind == ChaosEvent::Kind::kKill     ? Act{SIGKILL, "SIGKILL", "killed", "kill"}
                      : e.kind == ChaosEvent::Kind::kStop   ? Act{SIGTERM, "SIGTERM", "stopped", "stop"}
                      : e.kind == ChaosEvent::Kind::kFreeze ? Act{SIGSTOP, "SIGSTOP", "froze", "freeze"}
                                                            : Act{SIGCONT, "SIGCONT", "thawed", "thaw"};
      std::optional<size_t> p = hooks_.process_of(e.trainer);
      if (p.has_value() && frozen_.count(*p) && e.kind != ChaosEvent::Kind::kKill) p.reset();
      if (e.kind == ChaosEvent::Kind::kThaw) {  // the id's frozen process, though a new one may hold the id now
        p.reset();
        for (const auto& [process, id] : frozen_) {
          if (id == e.trainer) p = process;
        }
      }
      // Due once it steps; the events after it wait too, so the schedule
      // keeps its order (an add must not fill the id a kill is to free).
      if (p.has_value() && hooks_.has_stepped && !hooks_.has_stepped(*p)) break;
      fired_[i] = true;
      if (p.has_value()) {
        hooks_.kill(*p, act.signal);
        if (act.signal == SIGSTOP) {
          frozen_[*p] = e.trainer;
        } else if (act.signal == SIGCONT) {  // it runs on, or ends if the pservers took it out meanwhile
          frozen_.erase(*p);
        } else {
          ending_[e.trainer] = *p;
        }
        what = absl::StrCat(act.done, " trainer ", e.trainer, " (", act.name, ") at step ", job_steps);
      } else {
        what =
            absl::StrCat("trainer ", e.trainer, " was not ", e.kind == ChaosEvent::Kind::kThaw ? "frozen" : "running",
                         " at step ", job_steps, ": nothing to ", act.verb);
      }
    } else {
      // A process killed or stopped before it still running (not yet
      // reaped, or still leaving): its id is about to be free, so wait.
      bool ending = false;
      for (auto it = ending_.begin(); it != ending_.end();) {
        const bool running = hooks_.process_of(it->first) == it->second;
        ending |= running;
        it = running ? std::next(it) : ending_.erase(it);
      }
      if (ending) break;
      fired_[i] = true;
      std::vector<std::string> started;
      for (int id = 0; id < max_trainers_ && static_cast<int>(started.size()) < e.count; ++id) {
        const std::optional<size_t> p = hooks_.process_of(id);
        if (p.has_value() && !frozen_.count(*p)) continue;  // a frozen one's id is free once its lease is gone
        OAR_ASSIGN_OR_RETURN(std::string name, hooks_.start(id));
        started.push_back(name);
      }
      what = absl::StrCat("added ", started.empty() ? "none" : absl::StrJoin(started, ", "), " at step ", job_steps);
      if (static_cast<int>(started.size()) < e.count) {
        absl::StrAppend(&what, " (", e.count, " asked; the job has all ", max_trainers_, " trainers it may have)");
      }
    }
    std::fprintf(stderr, "oar launch: chaos '%s': %s\n", e.text.c_str(), what.c_str());
    done_.push_back(what);
  }
  return absl::OkStatus();
}

void ChaosRunner::KillFrozen() {
  for (const auto& [process, id] : frozen_) {
    std::fprintf(stderr,
                 "oar launch: the other trainers are done; killing trainer %d's process frozen by the chaos schedule\n",
                 id);
    hooks_.kill(process, SIGKILL);
  }
  frozen_.clear();
}

std::vector<std::string> ChaosRunner::NotReached() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < events_.size(); ++i) {
    if (!fired_[i]) out.push_back(absl::StrCat("'", events_[i].text, "'"));
  }
  return out;
}

std::vector<std::string> ElasticSummaryLines(const std::vector<TrainerReport>& trainers,
                                             const std::vector<ChunkDone>& chunks,
                                             const std::vector<std::string>& names, int epochs,
                                             int64_t chunks_per_epoch, const std::vector<std::string>& changes,
                                             bool* once, const DoneInEtcd& done_in_etcd) {
  std::vector<std::string> out;
  for (const std::string& c : changes) out.push_back("chaos: " + c);
  std::map<std::string, int> per_process;  // by process name
  std::map<std::pair<int, int64_t>, int> times;
  for (const ChunkDone& c : chunks) {
    ++per_process[c.child < names.size() ? names[c.child] : ""];
    ++times[{c.epoch, c.chunk}];
  }
  // Chunks etcd holds as done that no line claims: their trainer died
  // between its report and its line.
  std::vector<std::string> unsaid;
  for (const auto& [chunk, member] : done_in_etcd) {
    if (times.count(chunk)) continue;
    int id = -1;
    if (member.rfind("trainer/", 0) != 0 || !absl::SimpleAtoi(member.substr(8), &id)) continue;
    const TrainerReport* died = nullptr;
    for (const TrainerReport& t : trainers) {
      if (t.trainer == id && t.gone) died = &t;
    }
    if (died == nullptr) continue;
    ++per_process[died->name];
    ++times[chunk];
    unsaid.push_back(absl::StrCat(chunk.first, "/", chunk.second, " by ", died->name));
  }
  std::vector<std::string> who;
  for (const TrainerReport& t : trainers) {
    who.push_back(absl::StrCat(t.name, " ", per_process[t.name], t.gone ? " (gone)" : ""));
  }
  out.push_back("chunks trained: " + absl::StrJoin(who, ", "));
  if (!unsaid.empty()) {
    out.push_back(
        absl::StrCat("chunks etcd has as done whose trainer died before saying so: ", absl::StrJoin(unsaid, ", ")));
  }
  std::vector<std::string> twice, never;
  for (int e = 1; e <= epochs; ++e) {
    for (int64_t c = 0; c < chunks_per_epoch; ++c) {
      const auto it = times.find({e, c});
      const int n = it == times.end() ? 0 : it->second;
      if (n == 0) never.push_back(absl::StrCat(e, "/", c));
      if (n > 1) twice.push_back(absl::StrCat(e, "/", c, " x", n));
    }
  }
  *once = twice.empty() && never.empty();
  if (*once) {
    out.push_back(
        absl::StrCat("every chunk trained exactly once: ", epochs, " epoch(s) x ", chunks_per_epoch, " chunks"));
  } else {
    out.push_back(absl::StrCat("chunks (epoch/chunk) not trained exactly once: never ",
                               never.empty() ? "none" : absl::StrJoin(never, ", "), "; more than once ",
                               twice.empty() ? "none" : absl::StrJoin(twice, ", ")));
  }
  return out;
}

}  // namespace oar::cli
