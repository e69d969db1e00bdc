#include "tests/auth/test_tokens.h"

#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>

#include "src/common/base64url.h"

namespace dcm::testing {
namespace {

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(jwt_t* p) const { jwt_free(p); }
  void operator()(char* p) const { std::free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

// The big-endian bytes of a BN parameter of `key`, left-padded to `width` (0: minimal).
std::string BnParam(EVP_PKEY* key, const char* name, int width = 0) {
  BIGNUM* raw = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &raw) != 1) return "";
  Owned<BIGNUM> bn(raw);
  std::string bytes(width > 0 ? width : BN_num_bytes(bn.get()), '\0');
  BN_bn2binpad(bn.get(), reinterpret_cast<unsigned char*>(bytes.data()),
               static_cast<int>(bytes.size()));
  return Base64UrlEncode(bytes);
}

TestKey MakeKey(TestKeyType type) {
  Owned<EVP_PKEY> key(type == TestKeyType::kRsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256"));
  TestKey out;
  out.type = type;
  if (!key) return out;
  Owned<BIO> priv(BIO_new(BIO_s_mem()));
  Owned<BIO> pub(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  PEM_write_bio_PUBKEY(pub.get(), key.get());
  out.private_pem = BioText(priv.get());
  out.public_pem = BioText(pub.get());
  if (type == TestKeyType::kRsa) {
    out.n = BnParam(key.get(), OSSL_PKEY_PARAM_RSA_N);
    out.e = BnParam(key.get(), OSSL_PKEY_PARAM_RSA_E);
  } else {
    out.x = BnParam(key.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32);
    out.y = BnParam(key.get(), OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  }
  return out;
}

const TestKey& KeyAt(TestKeyType type, int index) {
  static std::mutex mu;
  static std::deque<TestKey> keys[2];  // deque: references stay valid as it grows
  std::lock_guard lock(mu);
  auto& list = keys[type == TestKeyType::kRsa ? 0 : 1];
  while (static_cast<int>(list.size()) <= index) list.push_back(MakeKey(type));
  return list[index];
}

// `claims_json` encoded by libjwt with `alg` and `key`, and header `kid` unless empty.
std::string Encode(jwt_alg_t alg, std::string_view key, std::string_view claims_json,
                   std::string_view kid) {
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return "";
  Owned<jwt_t> jwt(raw);
  const std::string claims(claims_json);
  const std::string kid_text(kid);
  if (jwt_add_grants_json(jwt.get(), claims.c_str()) != 0) return "";
  if (!kid.empty() && jwt_add_header(jwt.get(), "kid", kid_text.c_str()) != 0) return "";
  const auto* key_bytes = reinterpret_cast<const unsigned char*>(key.data());
  if (jwt_set_alg(jwt.get(), alg, key.empty() ? nullptr : key_bytes,
                  static_cast<int>(key.size())) != 0) {
    return "";
  }
  Owned<char> token(jwt_encode_str(jwt.get()));
  return token ? std::string(token.get()) : "";
}

}  // namespace

const TestKey& RsaKey(int index) { return KeyAt(TestKeyType::kRsa, index); }
const TestKey& EcKey(int index) { return KeyAt(TestKeyType::kEcP256, index); }

std::string Jwk(const TestKey& key, std::string_view kid, std::string_view alg) {
  std::string out = "{";
  if (key.type == TestKeyType::kRsa) {
    out += R"("kty":"RSA","n":")" + key.n + R"(","e":")" + key.e + '"';
  } else {
    out += R"("kty":"EC","crv":"P-256","x":")" + key.x + R"(","y":")" + key.y + '"';
  }
  out += R"(,"use":"sig")";
  if (!kid.empty()) out += R"(,"kid":")" + std::string(kid) + '"';
  if (!alg.empty()) out += R"(,"alg":")" + std::string(alg) + '"';
  return out + "}";
}

std::string JwksJson(const std::vector<std::string>& jwks) {
  std::string out = R"({"keys":[)";
  for (size_t i = 0; i < jwks.size(); ++i) out += (i ? "," : "") + jwks[i];
  return out + "]}";
}

std::string DefaultJwks() {
  return JwksJson({Jwk(RsaKey(), kRsaKid, "RS256"), Jwk(EcKey(), kEcKid, "ES256")});
}

std::string StandardClaims(std::string_view sub, int64_t exp_s, std::string_view extra_members) {
  std::string out = "{";
  auto add = [&out](std::string_view member) {
    if (member.empty()) return;
    if (out.size() > 1) out += ',';
    out += member;
  };
  if (!sub.empty()) add(R"("sub":")" + std::string(sub) + '"');
  if (exp_s >= 0) add(R"("exp":)" + std::to_string(exp_s));
  add(extra_members);
  return out + "}";
}

std::string MintToken(const TestKey& key, std::string_view kid, std::string_view claims_json) {
  const jwt_alg_t alg = key.type == TestKeyType::kRsa ? JWT_ALG_RS256 : JWT_ALG_ES256;
  return Encode(alg, key.private_pem, claims_json, kid);
}

std::string MintUnsignedToken(std::string_view claims_json, std::string_view kid) {
  return Encode(JWT_ALG_NONE, "", claims_json, kid);
}

std::string MintHmacToken(std::string_view secret, std::string_view claims_json,
                          std::string_view kid) {
  return Encode(JWT_ALG_HS256, secret, claims_json, kid);
}

std::string TamperPayload(std::string_view token, std::string_view claims_json) {
  const size_t first = token.find('.');
  const size_t second = token.find('.', first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos) return "";
  return std::string(token.substr(0, first + 1)) + Base64UrlEncode(claims_json) +
         std::string(token.substr(second));
}

}  // namespace dcm::testing
