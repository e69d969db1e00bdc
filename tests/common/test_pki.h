// A throwaway PKI for TLS tests: CAs, server and client certificates made in memory with
// OpenSSL, written as PEM files under the test's temp dir when a component wants paths.
//
//   TestCa ca("test CA");
//   auto server = ca.Issue("probe.test", "DNS:probe.test,IP:127.0.0.1", CertUsage::kServer);
//   auto client = ca.Issue("admin", "URI:spiffe://dcm.test/admin", CertUsage::kClient);
//   server.cert_file / server.key_file / ca.cert_file: PEM paths, removed by the destructors.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace dcm::testing {

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

enum class CertUsage { kServer, kClient };

// A P-256 key and its certificate, with PEM files (removed on destruction).
struct TestCert {
  TestCert() = default;
  TestCert(TestCert&&) = default;
  TestCert& operator=(TestCert&&) = default;
  ~TestCert();

  KeyPtr key;
  X509Ptr cert;
  std::string cert_file;
  std::string key_file;
  bool ok() const { return key && cert && !cert_file.empty() && !key_file.empty(); }
};

class TestCa {
 public:
  // A self-signed CA named `name`, valid from an hour ago for a day.
  explicit TestCa(const std::string& name);

  // A certificate signed by this CA. `subject_alt_names` in OpenSSL's config syntax
  // ("DNS:a.test,IP:127.0.0.1,URI:spiffe://x/y"; empty: none). `valid_days` < 0 makes one that
  // expired.
  TestCert Issue(const std::string& common_name, const std::string& subject_alt_names,
                 CertUsage usage, int valid_days = 1) const;

  bool ok() const { return self_.ok(); }
  X509* cert() const { return self_.cert.get(); }
  const std::string& cert_file() const { return self_.cert_file; }

 private:
  TestCert self_;
};

// Writes `cert` / `key` as PEM to a fresh file under ::testing::TempDir(); "" on failure.
std::string WriteCertPem(X509* cert, const std::string& name);
std::string WriteKeyPem(EVP_PKEY* key, const std::string& name);

}  // namespace dcm::testing
