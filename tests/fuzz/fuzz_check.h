// Shared by the fuzz targets: a check that aborts with the failed condition (so libFuzzer and
// the standalone driver both report the input), and the default service types.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/common/config.h"

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace dcm::fuzz {

// The service types `dcm serve` accepts when SERVICE_TYPES is not set.
inline const std::vector<std::string> kServiceTypes = Config{}.service_types;

}  // namespace dcm::fuzz
