#include "tests/common/test_pki.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace dcm::testing {
namespace {

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key` named `cn`, signed by `issuer` (self-signed CA when null).
X509Ptr MakeCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
                 const std::string& subject_alt_names, CertUsage usage, int valid_days) {
  static std::atomic<long> serial{1};
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  if (valid_days < 0) {
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), 2L * valid_days * 24 * 3600);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 1L * valid_days * 24 * 3600);
  } else {
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 1L * valid_days * 24 * 3600);
  }
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool ok = AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer == nullptr) {
    ok = ok && AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
         AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    ok = ok && AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE") &&
         AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always") &&
         AddExtension(cert.get(), signer, NID_ext_key_usage,
                      usage == CertUsage::kServer ? "serverAuth" : "clientAuth");
    if (!subject_alt_names.empty()) {
      ok = ok && AddExtension(cert.get(), signer, NID_subject_alt_name, subject_alt_names.c_str());
    }
  }
  if (!ok || X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return nullptr;
  }
  return cert;
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  return ::testing::TempDir() + "/dcm_pki_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

template <class Write>
std::string WritePemFile(const std::string& name, Write write) {
  const std::string path = TempPath(name);
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return "";
  const bool ok = write(f);
  std::fclose(f);
  if (!ok) {
    std::remove(path.c_str());
    return "";
  }
  return path;
}

}  // namespace

std::string WriteCertPem(X509* cert, const std::string& name) {
  return WritePemFile(name, [cert](FILE* f) { return PEM_write_X509(f, cert) == 1; });
}

std::string WriteKeyPem(EVP_PKEY* key, const std::string& name) {
  return WritePemFile(name, [key](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  });
}

TestCert::~TestCert() {
  if (!cert_file.empty()) std::remove(cert_file.c_str());
  if (!key_file.empty()) std::remove(key_file.c_str());
}

TestCa::TestCa(const std::string& name) {
  self_.key.reset(EVP_EC_gen("P-256"));
  if (!self_.key) return;
  self_.cert = MakeCert(self_.key.get(), name, nullptr, nullptr, "", CertUsage::kServer, 1);
  if (!self_.cert) return;
  self_.cert_file = WriteCertPem(self_.cert.get(), "ca.pem");
  self_.key_file = WriteKeyPem(self_.key.get(), "ca.key");
}

TestCert TestCa::Issue(const std::string& common_name, const std::string& subject_alt_names,
                       CertUsage usage, int valid_days) const {
  TestCert out;
  out.key.reset(EVP_EC_gen("P-256"));
  if (!out.key || !ok()) return out;
  out.cert = MakeCert(out.key.get(), common_name, self_.cert.get(), self_.key.get(),
                      subject_alt_names, usage, valid_days);
  if (!out.cert) return out;
  out.cert_file = WriteCertPem(out.cert.get(), "cert.pem");
  out.key_file = WriteKeyPem(out.key.get(), "key.pem");
  return out;
}

}  // namespace dcm::testing
