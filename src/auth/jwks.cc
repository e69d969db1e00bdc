#include "src/auth/jwks.h"

#include <simdjson.h>

#include <algorithm>
#include <optional>

#include "src/auth/json_util.h"
#include "src/auth/jwk_pem.h"
#include "src/common/base64url.h"

namespace dcm::auth {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

tl::unexpected<Error> Skip(std::string why) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(why));
}

// The string member `key` of `jwk`: nullopt when absent; an error when it is not a string.
Result<std::optional<std::string_view>> OptionalString(object jwk, std::string_view key) {
  auto value = Member(jwk, key);
  if (!value) return std::optional<std::string_view>();
  std::string_view text;
  if (value->get(text)) return Skip("'" + std::string(key) + "' is not a string");
  return std::optional<std::string_view>(text);
}

// The bytes of the base64url member `key` of `jwk` (required).
Result<std::string> Material(object jwk, std::string_view key) {
  ASSIGN_OR_RETURN(auto text, OptionalString(jwk, key));
  if (!text) return Skip("missing '" + std::string(key) + "'");
  auto bytes = Base64UrlDecode(*text, Padding::kAllow);
  if (!bytes || bytes->empty()) return Skip("'" + std::string(key) + "' is not base64url");
  return std::move(*bytes);
}

// Refuses keys published for something else than verifying signatures.
Status CheckUsage(object jwk) {
  ASSIGN_OR_RETURN(auto use, OptionalString(jwk, "use"));
  if (use && *use != "sig") return Skip("'use' is '" + Printable(*use) + "', not 'sig'");
  auto ops = Member(jwk, "key_ops");
  if (!ops) return OkStatus();
  array list;
  if (ops->get(list)) return Skip("'key_ops' is not an array");
  for (element op : list) {
    std::string_view name;
    if (!op.get(name) && name == "verify") return OkStatus();
  }
  return Skip("'key_ops' does not include 'verify'");
}

Result<VerificationKey> ParseRsa(object jwk) {
  ASSIGN_OR_RETURN(std::string n, Material(jwk, "n"));
  ASSIGN_OR_RETURN(std::string e, Material(jwk, "e"));
  VerificationKey key;
  key.type = KeyType::kRsa;
  ASSIGN_OR_RETURN(key.pem, RsaPublicKeyPem(n, e));
  return key;
}

Result<VerificationKey> ParseEc(object jwk) {
  ASSIGN_OR_RETURN(auto crv, OptionalString(jwk, "crv"));
  if (!crv) return Skip("missing 'crv'");
  if (*crv != "P-256") return Skip("curve '" + Printable(*crv) + "' is not supported (P-256 is)");
  ASSIGN_OR_RETURN(std::string x, Material(jwk, "x"));
  ASSIGN_OR_RETURN(std::string y, Material(jwk, "y"));
  VerificationKey key;
  key.type = KeyType::kEcP256;
  ASSIGN_OR_RETURN(key.pem, EcP256PublicKeyPem(x, y));
  return key;
}

Status CheckAlg(const VerificationKey& key) {
  if (key.alg.empty()) return OkStatus();
  if (key.alg != "RS256" && key.alg != "ES256") {
    return Skip("alg '" + Printable(key.alg) + "' is not accepted (RS256 and ES256 are)");
  }
  const KeyType needed = key.alg == "RS256" ? KeyType::kRsa : KeyType::kEcP256;
  if (key.type != needed) {
    return Skip(std::string("alg ") + key.alg + " does not fit an " + KeyTypeName(key.type) +
                " key");
  }
  return OkStatus();
}

// One JWK; the error says why it is skipped.
Result<VerificationKey> ParseJwk(object jwk, const std::string& kid) {
  RETURN_IF_ERROR(CheckUsage(jwk));
  ASSIGN_OR_RETURN(auto kty, OptionalString(jwk, "kty"));
  ASSIGN_OR_RETURN(auto alg, OptionalString(jwk, "alg"));
  if (!kty) return Skip("missing 'kty'");
  VerificationKey key;
  if (*kty == "RSA") {
    ASSIGN_OR_RETURN(key, ParseRsa(jwk));
  } else if (*kty == "EC") {
    ASSIGN_OR_RETURN(key, ParseEc(jwk));
  } else {
    return Skip("key type '" + Printable(*kty) + "' is not supported (RSA and EC are)");
  }
  key.kid = kid;
  key.alg = alg ? std::string(*alg) : "";
  RETURN_IF_ERROR(CheckAlg(key));
  return key;
}

// One member of `keys`; sets `kid` as soon as it is known, for the warning's label.
Result<VerificationKey> ParseEntry(element value, std::string* kid) {
  object jwk;
  if (value.get(jwk)) return Skip("not a JSON object");
  ASSIGN_OR_RETURN(auto kid_member, OptionalString(jwk, "kid"));
  if (kid_member && kid_member->size() > kMaxKidBytes) {
    return Skip("'kid' is longer than 256 bytes");
  }
  if (kid_member) *kid = *kid_member;
  return ParseJwk(jwk, *kid);
}

std::string Label(size_t index, const std::string& kid) {
  std::string label = "key #" + std::to_string(index);
  if (!kid.empty()) label += " (kid '" + Printable(kid) + "')";
  return label;
}

bool Repeats(const std::vector<VerificationKey>& keys, const VerificationKey& key) {
  return std::any_of(keys.begin(), keys.end(), [&](const VerificationKey& k) {
    return k.kid == key.kid && k.type == key.type;
  });
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : "; ") + item;
  return out;
}

}  // namespace

const char* KeyTypeName(KeyType type) { return type == KeyType::kRsa ? "RSA" : "EC P-256"; }

Result<Jwks> ParseJwks(std::string_view json) {
  if (json.size() > kMaxJwksBytes) {
    return Skip("JWKS is larger than 1 MiB (" + std::to_string(json.size()) + " bytes)");
  }
  auto root = ParseJson(json);
  if (!root) return Skip("JWKS is not JSON: " + root.error().message);
  array list;
  object document;
  auto keys = root->get(document) ? std::nullopt : Member(document, "keys");
  if (!keys || keys->get(list)) return Skip("not a JWKS: no \"keys\" array");
  if (list.size() > kMaxJwksKeys) {
    return Skip("JWKS has " + std::to_string(list.size()) + " keys (at most 100 are accepted)");
  }
  Jwks jwks;
  size_t index = 0;
  for (element value : list) {
    std::string kid;
    auto key = ParseEntry(value, &kid);
    if (key && Repeats(jwks.keys, *key)) key = Skip("repeats an earlier key's kid and type");
    if (key) {
      jwks.keys.push_back(std::move(*key));
    } else {
      jwks.warnings.push_back(Label(index, kid) + ": " + key.error().message);
    }
    ++index;
  }
  if (jwks.keys.empty()) {
    std::string why = "JWKS has no usable key";
    if (!jwks.warnings.empty()) why += ": " + Join(jwks.warnings);
    return Skip(std::move(why));
  }
  return jwks;
}

}  // namespace dcm::auth
