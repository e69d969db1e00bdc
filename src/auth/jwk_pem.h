// JWK key material to PEM, with OpenSSL 3 (EVP_PKEY_fromdata, PEM_write_bio_PUBKEY): the only
// OpenSSL code in src/auth; signatures are checked by libjwt. Internal to dcm_auth (used by
// jwks.cc). Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm::auth {

// An RSA public key from its big-endian modulus and exponent bytes. kInvalidArgument when the
// modulus is outside 2048..8192 bits, the exponent is even, 1, or longer than 8 bytes, or
// OpenSSL's public key check fails.
Result<std::string> RsaPublicKeyPem(std::string_view modulus, std::string_view exponent);

// A P-256 public key from its 32-byte big-endian coordinates. kInvalidArgument when a
// coordinate is not 32 bytes or the point is not on the curve.
Result<std::string> EcP256PublicKeyPem(std::string_view x, std::string_view y);

}  // namespace dcm::auth
