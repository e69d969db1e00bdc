#include "src/auth/jwk_pem.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <memory>

namespace dcm::auth {
namespace {

struct Free {
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
  void operator()(OSSL_PARAM_BLD* p) const { OSSL_PARAM_BLD_free(p); }
  void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

// A failure of OpenSSL on key material from outside: bad input, not a bug. Clears OpenSSL's
// (thread-local) error queue so it does not leak into the next, unrelated call.
tl::unexpected<Error> Invalid(std::string message) {
  ERR_clear_error();
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

Owned<BIGNUM> ToBignum(std::string_view bytes) {
  return Owned<BIGNUM>(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                                 static_cast<int>(bytes.size()), nullptr));
}

// The key `params` describe, checked by OpenSSL (for EC: the point is on the curve).
Result<Owned<EVP_PKEY>> KeyFromParams(const char* type, OSSL_PARAM* params) {
  Owned<EVP_PKEY_CTX> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params) <= 0) {
    return Invalid("key material rejected by OpenSSL");
  }
  Owned<EVP_PKEY> key(raw);
  Owned<EVP_PKEY_CTX> check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return Invalid("public key check failed");
  }
  return key;
}

Result<std::string> ToPem(EVP_PKEY* key) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInternal, "PEM_write_bio_PUBKEY failed");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

}  // namespace

Result<std::string> RsaPublicKeyPem(std::string_view modulus, std::string_view exponent) {
  Owned<BIGNUM> n = ToBignum(modulus);
  Owned<BIGNUM> e = ToBignum(exponent);
  if (!n || !e) return Invalid("RSA key material rejected by OpenSSL");
  const int bits = BN_num_bits(n.get());
  if (bits < 2048 || bits > 8192) {
    return Invalid("RSA modulus has " + std::to_string(bits) + " bits (2048..8192 accepted)");
  }
  // A long exponent makes every verification slow; real keys use 65537.
  if (BN_num_bytes(e.get()) > 8 || !BN_is_odd(e.get()) || BN_is_one(e.get())) {
    return Invalid("RSA exponent is not an odd number between 3 and 2^64");
  }
  Owned<OSSL_PARAM_BLD> build(OSSL_PARAM_BLD_new());
  if (!build || !OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) ||
      !OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_E, e.get())) {
    return Invalid("RSA key material rejected by OpenSSL");
  }
  Owned<OSSL_PARAM> params(OSSL_PARAM_BLD_to_param(build.get()));
  if (!params) return Invalid("RSA key material rejected by OpenSSL");
  ASSIGN_OR_RETURN(Owned<EVP_PKEY> key, KeyFromParams("RSA", params.get()));
  return ToPem(key.get());
}

Result<std::string> EcP256PublicKeyPem(std::string_view x, std::string_view y) {
  if (x.size() != 32 || y.size() != 32) {
    return Invalid("P-256 coordinates must be 32 bytes each (got " + std::to_string(x.size()) +
                   " and " + std::to_string(y.size()) + ")");
  }
  // SEC 1 uncompressed point: 0x04 || x || y.
  std::string point = "\x04";
  point.append(x).append(y);
  char group[] = "prime256v1";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      OSSL_PARAM_construct_end(),
  };
  ASSIGN_OR_RETURN(Owned<EVP_PKEY> key, KeyFromParams("EC", params));
  return ToPem(key.get());
}

}  // namespace dcm::auth
