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

// An RFC 4122 name-based UUID, version 5 (SHA-1 of the namespace's 16 bytes then `name`), as
// Python's uuid.uuid5(namespace, name) spells it. `namespace_uuid` must be a UUID (IsUuid).
// Federation ids (SPEC §10) use it: the same enclave and reservation give the same contract.
std::string UuidV5(std::string_view namespace_uuid, std::string_view name);

// RFC 4122 appendix C's namespaces.
inline constexpr char kUuidNamespaceDns[] = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
inline constexpr char kUuidNamespaceUrl[] = "6ba7b811-9dad-11d1-80b4-00c04fd430c8";

bool IsUuid(std::string_view text);

}  // namespace dcm
