// Linked into the libFuzzer builds only (scripts/fuzz.sh). libFuzzer calls LLVMFuzzerInitialize
// before fuzzing; with DCM_FUZZ_WRITE_SEEDS=<dir> in the environment it writes the target's
// built-in seeds (dcm::fuzz::Seeds(), the same the standalone driver uses) into <dir> as a
// starting corpus and exits.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace dcm::fuzz {
std::vector<std::string> Seeds();
}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* dir = std::getenv("DCM_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return 0;
  std::filesystem::create_directories(dir);
  const auto seeds = dcm::fuzz::Seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::filesystem::path(dir) / ("seed-" + std::to_string(i)),
                      std::ios::binary | std::ios::trunc);
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(0);
}
