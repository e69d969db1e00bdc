// JwksFile: the signing keys from a JWKS document on disk (AUTH_JWKS_FILE, SPEC §6), for sites
// without a reachable issuer. Read once at creation (a bad file is a startup config error) and
// again on Reload (SIGHUP). A key id the file lacks stays unknown until the next Reload.
//
// Thread-safety: all methods, from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/auth/key_source.h"
#include "src/common/result.h"

namespace dcm::auth {

class JwksFile final : public KeySource {
 public:
  // Reads and parses `path`. kInvalidArgument naming the file when it is unreadable, larger
  // than kMaxJwksBytes, or not a JWKS with a usable key. Skipped keys are logged (component
  // "auth") and kept in warnings().
  static Result<std::unique_ptr<JwksFile>> Load(std::string path);

  // Reads the file again. On success the new keys replace the old (a new generation when they
  // differ). On failure the old keys stay, and the error is returned for the caller to log.
  Status Reload();

  std::shared_ptr<const KeySnapshot> Keys() const override { return holder_.Current(); }
  uint64_t Generation() const override { return holder_.Generation(); }

  // The skipped-key warnings of the last successful read.
  std::vector<std::string> warnings() const;
  const std::string& path() const { return path_; }

 private:
  explicit JwksFile(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  KeySetHolder holder_;
  mutable std::mutex mu_;
  std::vector<std::string> warnings_;  // guarded by mu_
};

}  // namespace dcm::auth
