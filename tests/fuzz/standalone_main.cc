// A stand-in for libFuzzer's driver, so the fuzz targets build with g++ and run in ctest.
//
//   fuzz_<target> [--runs=N] [--seed=S] [--max_len=L] [--max_total_time=SECONDS] [PATH...]
//
// Runs the target over the built-in seeds (dcm::fuzz::Seeds() in the target's file) and every
// file given (directories are read one level deep), then over N deterministic mutations of
// them (seeded PRNG: the same flags give the same inputs, so a failure reproduces). --runs=0
// only replays, which is how a crash file from scripts/fuzz.sh is re-run under g++. A failed
// check aborts, as under libFuzzer; before every mutated input the driver keeps its bytes in
// memory and prints them (hex) if the process aborts, so the case can be saved and replayed.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace dcm::fuzz {
std::vector<std::string> Seeds();
}  // namespace dcm::fuzz

namespace {

struct Options {
  uint64_t runs = 10000;
  uint64_t seed = 1;
  size_t max_len = 8192;
  double max_total_time = 0;  // 0 = no limit
  std::vector<std::string> paths;
};

bool ParseFlag(std::string_view arg, std::string_view name, std::string* value) {
  if (!arg.starts_with(name) || arg.size() <= name.size() || arg[name.size()] != '=') return false;
  *value = std::string(arg.substr(name.size() + 1));
  return true;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string v;
    if (ParseFlag(arg, "--runs", &v) || ParseFlag(arg, "-runs", &v)) {
      o.runs = std::stoull(v);
    } else if (ParseFlag(arg, "--seed", &v) || ParseFlag(arg, "-seed", &v)) {
      o.seed = std::stoull(v);
    } else if (ParseFlag(arg, "--max_len", &v) || ParseFlag(arg, "-max_len", &v)) {
      o.max_len = std::stoull(v);
    } else if (ParseFlag(arg, "--max_total_time", &v) || ParseFlag(arg, "-max_total_time", &v)) {
      o.max_total_time = std::stod(v);
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    } else {
      o.paths.emplace_back(arg);
    }
  }
  return o;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> ReadInputs(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& entry : std::filesystem::directory_iterator(p)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.emplace_back(p);
    }
    for (const auto& f : files) out.push_back(ReadFile(f));
  }
  return out;
}

// Fragments that matter to JSON, UTF-8, RFC 3339 and URL parsers.
const std::vector<std::string> kTokens = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          "\"",
                                          ":",
                                          ",",
                                          "\\",
                                          "\\u0000",
                                          "\\ud800",
                                          "\\\"",
                                          "null",
                                          "true",
                                          "-1",
                                          "1e999",
                                          "0.5",
                                          "18446744073709551616",
                                          "\xC0\xAF",
                                          "\xED\xA0\x80",
                                          "\xF4\x90\x80\x80",
                                          "\xEF\xBF\xBD",
                                          "\xF0\x9F\x98\x80",
                                          "\x7F",
                                          std::string(1, '\0'),
                                          "Z",
                                          "+01:00",
                                          "T",
                                          "://",
                                          "@",
                                          "[::1]",
                                          ":65535",
                                          ":0",
                                          "%",
                                          "#",
                                          "?",
                                          "/",
                                          "http://",
                                          "https://",
                                          "\"schemaversion\":2",
                                          "\"id\":",
                                          "\"name\":",
                                          "\"data\":{}",
                                          std::string(64, '['),
                                          "dcm.provider.registered",
                                          "dcm.provider.rejected",
                                          "dcm.provider.registration_requested"};

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len) : rng_(seed), max_len_(max_len) {}

  std::string Mutate(const std::vector<std::string>& pool) {
    std::string s = pool[Below(pool.size())];
    const size_t steps = 1 + Below(4);
    for (size_t i = 0; i < steps; ++i) Step(s, pool);
    if (s.size() > max_len_) s.resize(max_len_);
    return s;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  void Step(std::string& s, const std::vector<std::string>& pool) {
    const size_t pos = Below(s.size() + 1);
    switch (Below(8)) {
      case 0:  // flip a bit
        if (!s.empty()) s[Below(s.size())] ^= static_cast<char>(1u << Below(8));
        break;
      case 1:  // set a random byte
        if (!s.empty()) s[Below(s.size())] = static_cast<char>(Below(256));
        break;
      case 2:  // insert a random byte
        s.insert(pos, 1, static_cast<char>(Below(256)));
        break;
      case 3:  // erase a range
        if (!s.empty()) s.erase(Below(s.size()), 1 + Below(16));
        break;
      case 4:  // duplicate a range
        if (!s.empty()) {
          const size_t from = Below(s.size());
          s.insert(pos, s.substr(from, 1 + Below(32)));
        }
        break;
      case 5:  // insert a token
        s.insert(pos, kTokens[Below(kTokens.size())]);
        break;
      case 6: {  // splice with another input
        const std::string& other = pool[Below(pool.size())];
        s = s.substr(0, pos) + other.substr(std::min(other.size(), Below(other.size() + 1)));
        break;
      }
      case 7:  // truncate
        s.resize(pos);
        break;
    }
  }

  std::mt19937_64 rng_;
  size_t max_len_;
};

// The input being run, printed if a check aborts so the case can be saved and replayed.
const std::string* g_current = nullptr;

void OnAbort(int) {
  if (g_current) {
    std::fprintf(stderr, "\ncrashing input (%zu bytes, hex):\n", g_current->size());
    for (unsigned char c : *g_current) std::fprintf(stderr, "%02x", c);
    std::fprintf(stderr, "\n");
  }
  std::signal(SIGABRT, SIG_DFL);
  std::abort();
}

void Run(const std::string& input) {
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  std::signal(SIGABRT, OnAbort);
  std::vector<std::string> pool = dcm::fuzz::Seeds();
  for (auto& input : ReadInputs(options.paths)) pool.push_back(std::move(input));
  for (const auto& input : pool) Run(input);

  const auto start = std::chrono::steady_clock::now();
  Mutator mutator(options.seed, options.max_len);
  uint64_t runs = 0;
  for (; runs < options.runs; ++runs) {
    if (options.max_total_time > 0 && runs % 256 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            options.max_total_time) {
      break;
    }
    Run(mutator.Mutate(pool));
  }
  std::printf("%s: %zu seeds and %llu mutations (seed %llu): no failure\n", argv[0], pool.size(),
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(options.seed));
  return 0;
}
