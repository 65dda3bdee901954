// Number scanning for the MultiSlot parser: a uint64 or a float at a
// position in a text buffer, with the results std::from_chars gives (same
// accepted syntax, same correctly rounded values) at a fraction of its cost
// on the inputs CTR files are made of.
//
//  - ScanUint64 reads eight digits per step (SWAR: the digits of a 64-bit
//    word found and combined with three multiplies), falling back to one
//    digit per step within eight bytes of the end.
//  - ScanFloat takes the exact fast path for plain decimals (`0.25`, `-3`,
//    `17.125`) whose digits form an integer m <= 2^24 with at most ten
//    after the point: m and 10^k are then exact floats and one IEEE
//    division rounds correctly. Anything else (exponents, long mantissas,
//    inf/nan) goes to std::from_chars.
//
// Both read [p, end) only, stop at the first byte that is not part of the
// number (the caller checks what follows), and return false when no number
// starts at p or a uint64 overflows.
//
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace oar::number_scan {

static_assert(std::endian::native == std::endian::little, "the SWAR digit scan assumes a little-endian machine");

inline constexpr uint64_t kPow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// The value of the first n (1..8) digits of the word x (x's bytes minus
// '0', the first digit in the lowest byte).
inline uint64_t CombineDigits(uint64_t t, int n) {
  t <<= 8 * (8 - n);  // the n digits move to the top; the bytes below are zeros
  t = (t * 10 + (t >> 8)) & 0x00FF00FF00FF00FFULL;
  t = (t * 100 + (t >> 16)) & 0x0000FFFF0000FFFFULL;
  return (t * 10000 + (t >> 32)) & 0xFFFFFFFFULL;
}

inline bool ScanUint64(const char*& p, const char* end, uint64_t* out) {
  const char* s = p;
  uint64_t v = 0;
  while (end - s >= 8) {
    uint64_t x;
    std::memcpy(&x, s, 8);
    const uint64_t t = x - 0x3030303030303030ULL;
    // A byte's high bit is set where it is not a digit. Bytes below the first
    // non-digit see no borrow or carry from their neighbours, so the lowest
    // set bit marks exactly the first non-digit.
    const uint64_t non_digit = (t | (t + 0x7676767676767676ULL)) & 0x8080808080808080ULL;
    const int n = non_digit == 0 ? 8 : std::countr_zero(non_digit) >> 3;
    if (n == 0) break;
    if (__builtin_mul_overflow(v, kPow10[n], &v) || __builtin_add_overflow(v, CombineDigits(t, n), &v)) return false;
    s += n;
    if (n < 8) {
      p = s;
      *out = v;
      return true;
    }
  }
  for (; s != end && IsDigit(*s); ++s) {
    if (__builtin_mul_overflow(v, uint64_t{10}, &v) || __builtin_add_overflow(v, uint64_t(*s - '0'), &v)) return false;
  }
  if (s == p) return false;
  p = s;
  *out = v;
  return true;
}

inline bool ScanFloat(const char*& p, const char* end, float* out) {
  static constexpr float kPow10f[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};
  const char* s = p;
  const bool negative = s != end && *s == '-';
  if (negative) ++s;
  uint64_t m = 0;
  int digits = 0, fraction = -1;  // fraction: digits after the point, -1 before one
  for (; s != end; ++s) {
    if (IsDigit(*s)) {
      if (++digits > 9) break;  // past 9 digits m may pass 2^24 anyway: the general path
      m = m * 10 + static_cast<uint64_t>(*s - '0');
      if (fraction >= 0) ++fraction;
    } else if (*s == '.' && fraction < 0) {
      fraction = 0;
    } else {
      break;
    }
  }
  const bool plain = digits > 0 && digits <= 9 && m <= (uint64_t{1} << 24) && fraction <= 10 &&
                     (s == end || (*s != 'e' && *s != 'E' && !IsDigit(*s)));
  if (plain) {
    float v = static_cast<float>(m);
    if (fraction > 0) v /= kPow10f[fraction];
    *out = negative ? -v : v;
    p = s;
    return true;
  }
  const auto [stop, ec] = std::from_chars(p, end, *out);
  if (ec != std::errc()) return false;
  p = stop;
  return true;
}

}  // namespace oar::number_scan
