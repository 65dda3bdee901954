// DataFeedDesc: Fluid's example text from the reference loads, prints and
// loads again to the same message; field numbers are Fluid's; the setters
// act as the reference says; bad descriptions are errors naming the slot.
#include "common/data/data_feed_desc.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace oar {
namespace {

// The reference's example, as a Fluid user writes it.
constexpr char kFluidExample[] = R"(name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
    slots {
        name: "words"
        type: "uint64"
        is_dense: false
        is_used: true
    }
    slots {
        name: "label"
        type: "uint64"
        is_dense: false
        is_used: true
    }
}
)";

TEST(DataFeedDescTest, FluidsExampleLoadsAndRoundTrips) {
  const std::string path = ::testing::TempDir() + "/data_feed_desc_test.proto";
  { std::ofstream(path) << kFluidExample; }
  auto feed = DataFeedDesc::Load(path);
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_EQ(feed->proto().name(), "MultiSlotDataFeed");
  EXPECT_EQ(feed->batch_size(), 2);
  ASSERT_EQ(feed->proto().multi_slot_desc().slots_size(), 2);
  EXPECT_EQ(feed->proto().multi_slot_desc().slots(1).name(), "label");
  EXPECT_EQ(feed->used_slots(), (std::vector<int>{0, 1}));
  auto again = DataFeedDesc::Parse(feed->desc());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->proto().SerializeAsString(), feed->proto().SerializeAsString());
}

TEST(DataFeedDescTest, FieldNumbersAreFluids) {
  auto feed = DataFeedDesc::Parse(
      "name: 'n' batch_size: 3 pipe_command: 'cat' thread_num: 4 "
      "multi_slot_desc { slots { name: 's' type: 'float' is_dense: true is_used: true shape: [-1, 2] } }");
  ASSERT_TRUE(feed.ok()) << feed.status();
  // The wire bytes by hand, (field << 3 | wire type) with Fluid's numbers.
  const std::string slot = std::string("\x0a\x01s", 3) +  // name = 1
                           std::string(
                               "\x12\x05"
                               "float",
                               7) +                              // type = 2
                           std::string("\x18\x01\x20\x01", 4) +  // is_dense = 3, is_used = 4
                           std::string("\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11) +   // shape = 5: -1
                           std::string("\x28\x02", 2);                                         // shape = 5: 2
  const std::string slots = std::string("\x0a", 1) + static_cast<char>(slot.size()) + slot;    // slots = 1
  const std::string want = std::string("\x0a\x01n", 3) +                                       // name = 1
                           std::string("\x10\x03", 2) +                                        // batch_size = 2
                           std::string("\x1a", 1) + static_cast<char>(slots.size()) + slots +  // multi_slot_desc = 3
                           std::string(
                               "\x22\x03"
                               "cat",
                               5) +                     // pipe_command = 4
                           std::string("\x28\x04", 2);  // thread_num = 5
  EXPECT_EQ(feed->proto().SerializeAsString(), want);
}

TEST(DataFeedDescTest, SettersActOnTheNamedSlotsOnly) {
  auto feed = DataFeedDesc::Parse(
      "multi_slot_desc { slots { name: 'a' type: 'uint64' } slots { name: 'b' type: 'float' } "
      "slots { name: 'c' type: 'float' } }");
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_EQ(feed->batch_size(), 32);  // Fluid's default
  feed->set_batch_size(128);
  EXPECT_EQ(feed->batch_size(), 128);
  ASSERT_TRUE(feed->set_use_slots({"a", "c"}).ok());
  ASSERT_TRUE(feed->set_dense_slots({"c"}).ok());
  EXPECT_EQ(feed->used_slots(), (std::vector<int>{0, 2}));
  EXPECT_FALSE(feed->proto().multi_slot_desc().slots(0).is_dense());
  EXPECT_TRUE(feed->proto().multi_slot_desc().slots(2).is_dense());
  absl::Status s = feed->set_use_slots({"b", "nope"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'nope'"), std::string::npos) << s;
  EXPECT_FALSE(feed->proto().multi_slot_desc().slots(1).is_used()) << "a failed call changes nothing";
  EXPECT_NE(feed->desc().find("batch_size: 128"), std::string::npos) << feed->desc();
}

TEST(DataFeedDescTest, BadDescriptionsAreErrorsNamingWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"batch_size: 'x'", "protobuf text format"},
      {"batch_size: 0", "batch_size is 0"},
      {"multi_slot_desc { slots { name: 'a' type: 'int8' } }", "'a') has type 'int8'"},
      {"multi_slot_desc { slots { name: 'a' type: 'float' } slots { name: 'a' type: 'float' } }", "two slots"},
      {"multi_slot_desc { slots { name: 'd' type: 'float' shape: [-1, -1] } }", "more than one -1"},
      {"multi_slot_desc { slots { name: 'd' type: 'float' shape: [0] } }", "positive or -1"},
      {"input_type: 1", "not implemented"},
  };
  for (const Case& c : cases) {
    auto feed = DataFeedDesc::Parse(c.text, "feed.prototxt");
    ASSERT_FALSE(feed.ok()) << c.text;
    EXPECT_NE(feed.status().message().find(c.says), std::string::npos) << c.text << " -> " << feed.status();
    EXPECT_NE(feed.status().message().find("feed.prototxt"), std::string::npos) << feed.status();
  }
  EXPECT_EQ(DataFeedDesc::Load("/nonexistent/data.proto").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace oar
