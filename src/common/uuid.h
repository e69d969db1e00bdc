// UUID helpers. Event ids and generated provider ids are UUIDv4 strings (lowercase, hyphenated).
#pragma once

#include <string>
#include <string_view>

namespace dcm {

// A random UUIDv4 from a thread-local 64-bit generator seeded from std::random_device.
std::string NewUuidV4();

// A UUID-formatted id derived deterministically from `seed` (version nibble 4, RFC 4122
// variant). Deciders use it so that re-deciding the same request yields the same ids.
std::string DeterministicUuid(std::string_view seed);

bool IsUuid(std::string_view text);

}  // namespace dcm
