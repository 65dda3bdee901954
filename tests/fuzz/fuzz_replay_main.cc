// The main of a fuzz target when it is not linked with libFuzzer (GCC
// builds, `make test`): runs the target once on every input named on the
// command line (files, or directories of files: the committed seed corpus
// and regression inputs), so every found crash stays fixed in the plain
// suite too. `--write_seeds DIR` writes the target's FuzzSeeds() there.
//
//   build/tests/fuzz/var_message_fuzzer tests/fuzz/corpus/var_message tests/fuzz/regressions/var_message
//
// Thread-safety: a program's main.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int WriteSeeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::vector<std::string> seeds = oar::fuzz::FuzzSeeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "seed_%03zu", i);
    std::ofstream(std::filesystem::path(dir) / name, std::ios::binary) << seeds[i];
  }
  std::printf("wrote %zu seeds into %s\n", seeds.size(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write_seeds") return WriteSeeds(argv[2]);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s INPUT_OR_DIR... | --write_seeds DIR\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) inputs.push_back(e.path());
      }
    } else if (std::filesystem::is_regular_file(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs without a crash\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
