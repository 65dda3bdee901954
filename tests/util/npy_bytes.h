// An .npy file's bytes as numpy.save writes them (format 1.0 or 2.0, the
// header padded to 64 bytes), for tests that make arrays numpy did not.
//
// Thread-safety: stateless.
#pragma once

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace oar {

// `header`: the dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }".
inline std::string NpyBytes(const std::string& header, const std::string& data, int major = 1) {
  std::string h = header;
  const size_t fixed = major == 1 ? 10 : 12;
  while ((fixed + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = h.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

template <typename T>
std::string RawBytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace oar
