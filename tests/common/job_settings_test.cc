// JobSettings: the text a trainer sends a pserver round-trips, and a
// difference names each setting that differs with both values and ids.
#include "common/base/job_settings.h"

#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(JobSettingsTest, EncodesAndDecodesNameValuePairs) {
  const JobSettings s = {{"batch_size", 128}, {"seed", -3}, {"limit", 0}};
  EXPECT_EQ(EncodeJobSettings(s), "batch_size=128 seed=-3 limit=0");
  auto back = DecodeJobSettings(EncodeJobSettings(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  for (const char* bad : {"seed", "seed=x", "=3", "seed=3 limit"}) {
    EXPECT_FALSE(DecodeJobSettings(bad).ok()) << bad;
  }
}

TEST(JobSettingsTest, ADisagreementNamesEachDifferenceWithBothValues) {
  const JobSettings a = {{"batch_size", 64}, {"seed", 3}, {"limit", 0}};
  EXPECT_EQ(Disagreement(a, 1, a, 0), "");
  const JobSettings b = {{"batch_size", 64}, {"seed", 4}, {"limit", 100}};
  EXPECT_EQ(Disagreement(b, 1, a, 0),
            "trainer 1 trains with --seed 4, --limit 100 but trainer 0 with --seed 3, --limit 0; start every trainer "
            "with the same --batch_size, --seed, --limit (the trainers split the data and the steps by them)");
  const JobSettings fewer = {{"batch_size", 64}, {"seed", 3}};
  EXPECT_NE(Disagreement(fewer, 2, a, 0).find("trainer 2 trains with no --limit but trainer 0 with --limit 0"),
            std::string::npos);
}

TEST(JobSettingsTest, AnAspectOfAFlagIsShownAsItIsAndTheAdviceNamesTheFlagOnce) {
  const JobSettings a = {{"data_feed.batch_size", 32}, {"files.count", 4}, {"files.names", 77}};
  const JobSettings b = {{"data_feed.batch_size", 32}, {"files.count", 2}, {"files.names", 78}};
  EXPECT_EQ(Disagreement(b, 1, a, 0),
            "trainer 1 trains with files.count 2, files.names 78 but trainer 0 with files.count 4, files.names 77; "
            "start every trainer with the same --data_feed, --files (the trainers split the data and the steps by "
            "them)");
}

}  // namespace
}  // namespace oar
