// TlsClientContext: the TLS settings of an outbound client (trust, verification, client
// certificate), built once and shared by every connection and every client that uses them
// (ProbeClient, HttpClient and the placement clients over it). Building one costs ~110 ms with
// the system trust store (Debian's bundle is parsed once), so build it at start, once per
// configuration, and pass the shared_ptr around. No Asio here: the OpenSSL context lives in
// Impl, which only src/http/dialer.h (internal, included by .cc files) completes.
//
// Every connection made with it: TLS 1.2 or newer; unless insecure_skip_verify, the server's
// chain verified against the CA file (or the system store) and its certificate checked for the
// host name, or for an IP SAN when the host is an IP literal (no partial wildcards); SNI sent
// for names (never for IP literals, RFC 6066). The optional client certificate is presented to
// servers that ask for one (mTLS to SPs: SP_CLIENT_CERT_FILE / SP_CLIENT_KEY_FILE).
//
// Thread-safety: immutable after Create; share it freely.
#pragma once

#include <memory>
#include <string>

#include "src/common/result.h"

namespace dcm::http {

struct TlsClientOptions {
  // PEM CA bundle that verifies servers; empty = the system's default verify paths.
  std::string ca_file = {};
  // Explicit opt-in: no certificate or host name verification (SNI is still sent).
  bool insecure_skip_verify = false;
  // PEM certificate chain and private key presented to servers that request a client
  // certificate. Both or neither.
  std::string client_cert_file = {};
  std::string client_key_file = {};
};

class TlsClientContext {
 public:
  // kInvalidArgument naming the file for an unreadable or invalid ca_file, client_cert_file or
  // client_key_file, a key that does not match the certificate, or only one of the two given;
  // kInternal if OpenSSL cannot be set up or the system CA store cannot be loaded.
  static Result<std::shared_ptr<const TlsClientContext>> Create(const TlsClientOptions& options);
  // The context of TlsClientOptions{} (system store, verified, no client certificate), built on
  // first use and shared by the whole process: what an https client uses when given no context.
  static Result<std::shared_ptr<const TlsClientContext>> Default();

  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  const TlsClientOptions& options() const { return options_; }
  bool verifies() const { return !options_.insecure_skip_verify; }

  struct Impl;  // completed in src/http/dialer.h
  Impl& impl() const { return *impl_; }

 private:
  TlsClientContext(TlsClientOptions options, std::unique_ptr<Impl> impl);
  TlsClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcm::http
