// The role and cluster `oar run` reads from the PADDLE_* environment, with
// a fake environment: every required variable, the Fleet aliases, flags that
// override, and errors that name the variable.
#include "cli/role_env.h"
#include "cli/trainers_flag.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace oar::cli {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  GetEnv Get() const {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(RoleEnvTest, ReadsATrainerAndAPserver) {
  FakeEnv e{{{"PADDLE_TRAINING_ROLE", "TRAINER"},
             {"PADDLE_TRAINER_ID", "1"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_PSERVER_ENDPOINTS", "10.0.0.1:6174,10.0.0.2:6174"}}};
  auto t = ResolveRole(e.Get(), {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->role, RoleEnv::Role::kTrainer);
  EXPECT_EQ(t->trainer_id, 1);
  EXPECT_EQ(t->trainers, 2);
  EXPECT_EQ(t->pservers, (std::vector<std::string>{"10.0.0.1:6174", "10.0.0.2:6174"}));
  FakeEnv p{{{"TRAINING_ROLE", "PSERVER"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_PSERVERS_IP_PORT_LIST", "10.0.0.1:6174,10.0.0.2:6174"},
             {"POD_IP", "10.0.0.2"},
             {"PADDLE_PORT", "6174"}}};
  auto ps = ResolveRole(p.Get(), {});
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->role, RoleEnv::Role::kPserver);
  EXPECT_EQ(ps->current_endpoint, "10.0.0.2:6174");
}

// A pserver job's trainers may be told each other's endpoints (the data
// layer's global shuffle joins them over them); a list of the wrong length
// is refused.
TEST(RoleEnvTest, APserverJobsTrainerMayReadTheTrainerEndpoints) {
  FakeEnv e{{{"PADDLE_TRAINING_ROLE", "TRAINER"},
             {"PADDLE_TRAINER_ID", "1"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_PSERVER_ENDPOINTS", "10.0.0.1:6174"},
             {"PADDLE_TRAINER_ENDPOINTS", "10.0.0.5:6170,10.0.0.6:6170"},
             {"PADDLE_CURRENT_ENDPOINT", "10.0.0.6:6170"}}};
  auto t = ResolveRole(e.Get(), {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->trainer_endpoints, (std::vector<std::string>{"10.0.0.5:6170", "10.0.0.6:6170"}));
  EXPECT_EQ(t->current_endpoint, "10.0.0.6:6170");
  e.vars["PADDLE_TRAINER_ENDPOINTS"] = "10.0.0.5:6170";
  auto bad = ResolveRole(e.Get(), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PADDLE_TRAINER_ENDPOINTS lists 1 endpoints but PADDLE_TRAINERS_NUM=2"),
            std::string::npos)
      << bad.status();
}

// A list written with spaces after its commas reads as the transpiler
// reads it (before, the pserver did not find its own endpoint in it).
TEST(RoleEnvTest, EndpointListsAreTrimmed) {
  FakeEnv p{{{"PADDLE_TRAINING_ROLE", "PSERVER"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_PSERVER_ENDPOINTS", "127.0.0.1:36601, 127.0.0.1:36602 ,"},
             {"PADDLE_CURRENT_ENDPOINT", "127.0.0.1:36602"}}};
  auto ps = ResolveRole(p.Get(), {});
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->pservers, (std::vector<std::string>{"127.0.0.1:36601", "127.0.0.1:36602"}));
  EXPECT_EQ(ps->current_endpoint, "127.0.0.1:36602");
}

TEST(RoleEnvTest, FlagsOverrideTheEnvironment) {
  FakeEnv e{{{"PADDLE_TRAINING_ROLE", "TRAINER"},
             {"PADDLE_TRAINER_ID", "0"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_PSERVER_ENDPOINTS", "a:1"}}};
  RoleOverrides o;
  o.trainer_id = 1;
  o.pservers = "b:2";
  auto t = ResolveRole(e.Get(), o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->trainer_id, 1);
  EXPECT_EQ(t->pservers, (std::vector<std::string>{"b:2"}));
}

TEST(RoleEnvTest, MissingOrContradictoryValuesNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string expect;
  };
  const std::map<std::string, std::string> trainer = {{"PADDLE_TRAINING_ROLE", "TRAINER"},
                                                      {"PADDLE_TRAINER_ID", "0"},
                                                      {"PADDLE_TRAINERS_NUM", "2"},
                                                      {"PADDLE_PSERVER_ENDPOINTS", "a:1"}};
  auto with = [&](std::map<std::string, std::string> m, const std::string& k, const char* v) {
    if (v == nullptr) {
      m.erase(k);
    } else {
      m[k] = v;
    }
    return m;
  };
  std::vector<Case> cases = {
      {with(trainer, "PADDLE_TRAINING_ROLE", nullptr), "PADDLE_TRAINING_ROLE is not set"},
      {with(trainer, "PADDLE_TRAINING_ROLE", "WORKER"), "PADDLE_TRAINING_ROLE='WORKER'"},
      {with(with(trainer, "TRAINING_ROLE", "PSERVER"), "PADDLE_TRAINING_ROLE", "TRAINER"), "disagree"},
      {with(trainer, "PADDLE_TRAINER_ID", nullptr), "PADDLE_TRAINER_ID is not set"},
      {with(trainer, "PADDLE_TRAINER_ID", "2"), "PADDLE_TRAINER_ID=2 is not in [0, 2)"},
      {with(trainer, "PADDLE_TRAINERS_NUM", "two"), "PADDLE_TRAINERS_NUM='two' is not a number"},
      {with(trainer, "PADDLE_PSERVER_ENDPOINTS", nullptr), "PADDLE_PSERVER_ENDPOINTS is not set"},
      {with(with(trainer, "PADDLE_TRAINING_ROLE", "PSERVER"), "PADDLE_CURRENT_ENDPOINT", "b:2"),
       "b:2 is not in PADDLE_PSERVER_ENDPOINTS"},
      {with(trainer, "PADDLE_TRAINING_ROLE", "PSERVER"), "PADDLE_CURRENT_ENDPOINT (or POD_IP and PADDLE_PORT)"},
      {with(with(with(trainer, "PADDLE_CURRENT_ENDPOINT", "a:1"), "POD_IP", "c"), "PADDLE_PORT", "3"), "disagree"},
  };
  for (const auto& c : cases) {
    FakeEnv e{c.vars};
    auto r = ResolveRole(e.Get(), {});
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
}

TEST(RoleEnvTest, Nccl2ReadsTheTrainerEndpoints) {
  FakeEnv e{{{"PADDLE_TRAINING_ROLE", "TRAINER"},
             {"PADDLE_TRAINER_ID", "1"},
             {"PADDLE_TRAINERS_NUM", "2"},
             {"PADDLE_TRAINER_ENDPOINTS", "a:1,b:2"},
             {"PADDLE_CURRENT_ENDPOINT", "b:2"}}};
  auto t = ResolveRole(e.Get(), {}, /*nccl2=*/true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->trainer_endpoints, (std::vector<std::string>{"a:1", "b:2"}));
  e.vars["PADDLE_TRAINERS_NUM"] = "3";
  EXPECT_NE(ResolveRole(e.Get(), {}, true).status().message().find("lists 2 endpoints but PADDLE_TRAINERS_NUM=3"),
            std::string::npos);
}

TEST(RoleEnvTest, TrainersAreANumberOrAnElasticJobsMinAndMax) {
  auto n = ParseTrainerRange("4", "--trainers");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->min, 4);
  EXPECT_EQ(n->max, 4);
  EXPECT_FALSE(n->range);
  auto r = ParseTrainerRange("2:4", "PADDLE_ELASTIC_NP");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->min, 2);
  EXPECT_EQ(r->max, 4);
  EXPECT_TRUE(r->range);
  for (const char* bad : {"", "0", "4:2", "0:3", "2:", ":4", "two", "2:4:6"}) {
    auto b = ParseTrainerRange(bad, "PADDLE_ELASTIC_NP");
    EXPECT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(absl::StrCat("PADDLE_ELASTIC_NP='", bad, "'")), std::string::npos)
        << b.status();
  }
}

}  // namespace
}  // namespace oar::cli
