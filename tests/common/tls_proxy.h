// A TLS-terminating proxy for client TLS tests: listens on 127.0.0.1:0, completes a TLS
// handshake with a server certificate from the test PKI (optionally requiring a client
// certificate signed by a given CA), and pipes the plaintext to a backend on 127.0.0.1 (an
// HttpServer, sp-sim, a fake Policy Manager...), so every plain-HTTP fake also serves HTTPS
// with its full HTTP behaviour (keep-alive, status codes, bodies). One thread per connection;
// counts connections and remembers the client certificates it saw.
//
//   TestCa ca("ca");
//   auto cert = ca.Issue("sp.test", "DNS:sp.test,IP:127.0.0.1", CertUsage::kServer);
//   TlsProxy proxy(cert, backend_port);                 // https://127.0.0.1:<proxy.port()>
//   TlsProxy mtls(cert, backend_port, &client_ca);      // requires a client certificate
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_pki.h"

namespace dcm::testing {

class TlsProxy {
 public:
  // `client_ca`: when set, a client certificate signed by it is required (handshake fails
  // without one). `max_version`: e.g. TLS1_2_VERSION (0 = OpenSSL's newest); with TLS 1.2 a
  // refused client certificate fails the client's handshake itself, with TLS 1.3 only the
  // client's first read or write after it.
  TlsProxy(const TestCert& server_cert, uint16_t backend_port, const TestCa* client_ca = nullptr,
           int max_version = 0);
  ~TlsProxy();
  TlsProxy(const TlsProxy&) = delete;
  TlsProxy& operator=(const TlsProxy&) = delete;

  uint16_t port() const { return port_; }
  // TCP connections accepted, and TLS handshakes completed.
  int accepted() const { return accepted_.load(); }
  int handshakes() const { return handshakes_.load(); }
  // Common names of the client certificates presented in completed handshakes.
  std::vector<std::string> client_subjects() const;
  // Closes every open connection (with close_notify), as a server dropping idle keep-alive
  // connections does. Returns once they are closed.
  void DropConnections();

 private:
  void AcceptLoop();
  void Serve(int fd);

  SSL_CTX* ctx_ = nullptr;
  uint16_t backend_port_ = 0;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::atomic<int> accepted_{0};
  std::atomic<int> handshakes_{0};
  mutable std::mutex mu_;
  std::vector<std::string> subjects_;
  std::vector<int> open_fds_;  // client-side fds of live connections
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace dcm::testing
