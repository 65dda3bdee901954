// number_scan against std::from_chars: the same acceptance, the same value
// bit for bit and the same stopping point, on random ids of every length
// (leading zeros, overflow) and random decimals of every precision, on the
// SWAR path and on the byte-at-a-time tail near a buffer's end.
#include "common/data/number_scan.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace oar::number_scan {
namespace {

// Scans `text` both ways; the views end exactly at the text's end, so short
// tokens take the tail path and long ones the word path.
void ExpectSameUint(const std::string& text) {
  const char* end = text.data() + text.size();
  uint64_t want = 0, got = 0;
  const auto [want_stop, ec] = std::from_chars(text.data(), end, want);
  const char* stop = text.data();
  const bool ok = ScanUint64(stop, end, &got);
  ASSERT_EQ(ok, ec == std::errc()) << "'" << text << "'";
  if (!ok) return;
  EXPECT_EQ(got, want) << "'" << text << "'";
  EXPECT_EQ(stop, want_stop) << "'" << text << "'";
}

void ExpectSameFloat(const std::string& text) {
  const char* end = text.data() + text.size();
  float want = 0, got = 0;
  const auto [want_stop, ec] = std::from_chars(text.data(), end, want);
  const char* stop = text.data();
  const bool ok = ScanFloat(stop, end, &got);
  ASSERT_EQ(ok, ec == std::errc()) << "'" << text << "'";
  if (!ok) return;
  EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "'" << text << "': " << got << " vs " << want;
  EXPECT_EQ(stop, want_stop) << "'" << text << "'";
}

TEST(NumberScanTest, Uint64EqualsFromChars) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    std::string s = std::to_string(rng() >> (rng() % 64));
    if (i % 5 == 0) s = std::string(rng() % 6, '0') + s;  // leading zeros
    if (i % 3 == 0) s += i % 2 ? " 17" : "\t";            // a separator after it
    if (i % 11 == 0) s += "x";                            // a bad byte after it
    ExpectSameUint(s);
  }
  for (const char* s : {"18446744073709551615", "18446744073709551616", "99999999999999999999", "0", "00000000",
                        "000000000000000000000000000042", "123456789012345678901234", "", " 1", "-1", "+1", "x",
                        "12345678 ", "1234567890123456"}) {
    ExpectSameUint(s);
  }
}

TEST(NumberScanTest, FloatEqualsFromChars) {
  std::mt19937_64 rng(12);
  char buf[64];
  for (int i = 0; i < 200000; ++i) {
    float f = std::ldexp(static_cast<float>(rng() % 100000000), -static_cast<int>(rng() % 40));
    if (rng() % 2) f = -f;
    std::snprintf(buf, sizeof buf, i % 4 == 0 ? "%.*e" : "%.*f", static_cast<int>(rng() % 13), f);
    std::string s = buf;
    if (i % 3 == 0) s += " 1";
    ExpectSameFloat(s);
  }
  for (const char* s : {"0", "-0", ".5", "-.5", "5.", "16777216", "16777217", "0.1", "3.4028235e38", "1e-50", "inf",
                        "-nan", "1.2.3", "-", ".", "+1", "1e", "0.0000000001", "12345.678901"}) {
    ExpectSameFloat(s);
  }
}

}  // namespace
}  // namespace oar::number_scan
