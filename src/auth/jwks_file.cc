#include "src/auth/jwks_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "src/common/log.h"

namespace dcm::auth {
namespace {

Result<std::string> ReadBounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AUTH_JWKS_FILE " + path + ": cannot open: " + std::strerror(errno));
  }
  std::string text(kMaxJwksBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return MakeError(ErrorCode::kInvalidArgument, "AUTH_JWKS_FILE " + path + ": read failed");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;  // one byte over the limit, if the file is larger: ParseJwks refuses it
}

}  // namespace

Result<std::unique_ptr<JwksFile>> JwksFile::Load(std::string path) {
  std::unique_ptr<JwksFile> file(new JwksFile(std::move(path)));
  RETURN_IF_ERROR(file->Reload());
  return file;
}

Status JwksFile::Reload() {
  ASSIGN_OR_RETURN(std::string text, ReadBounded(path_));
  auto jwks = ParseJwks(text);
  if (!jwks) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AUTH_JWKS_FILE " + path_ + ": " + jwks.error().message);
  }
  auto logger = Logger("auth");
  for (const auto& warning : jwks->warnings) {
    logger->warn("msg=\"JWKS key skipped\" file=\"{}\" why=\"{}\"", path_, warning);
  }
  const size_t count = jwks->keys.size();
  const bool changed = holder_.Publish(std::move(jwks->keys));
  logger->info("msg=\"signing keys loaded\" file=\"{}\" keys={} changed={}", path_, count, changed);
  std::lock_guard lock(mu_);
  warnings_ = std::move(jwks->warnings);
  return OkStatus();
}

std::vector<std::string> JwksFile::warnings() const {
  std::lock_guard lock(mu_);
  return warnings_;
}

}  // namespace dcm::auth
