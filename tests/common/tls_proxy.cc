#include "tests/common/tls_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>

namespace dcm::testing {
namespace {

int ListenLoopback(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 64) != 0) {
    return -1;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

int ConnectLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

TlsProxy::TlsProxy(const TestCert& server_cert, uint16_t backend_port, const TestCa* client_ca,
                   int max_version)
    : backend_port_(backend_port) {
  std::signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(2): a closed peer must not kill us
  ctx_ = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(ctx_, server_cert.cert.get());
  SSL_CTX_use_PrivateKey(ctx_, server_cert.key.get());
  if (max_version != 0) SSL_CTX_set_max_proto_version(ctx_, max_version);
  if (client_ca != nullptr) {
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_), client_ca->cert());
    SSL_CTX_add_client_CA(ctx_, client_ca->cert());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  listen_fd_ = ListenLoopback(&port_);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TlsProxy::~TlsProxy() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes the connection threads
    threads = std::move(threads_);
  }
  for (auto& t : threads) t.join();
  SSL_CTX_free(ctx_);
}

std::vector<std::string> TlsProxy::client_subjects() const {
  std::lock_guard lock(mu_);
  return subjects_;
}

void TlsProxy::DropConnections() {
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu_);
      if (open_fds_.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void TlsProxy::AcceptLoop() {
  for (;;) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    ++accepted_;
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TlsProxy::Serve(int fd) {
  timeval tv{5, 0};  // a stuck peer must not wedge a test
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  SSL* ssl = SSL_new(ctx_);
  SSL_set_fd(ssl, fd);
  int backend = -1;
  if (SSL_accept(ssl) == 1) {
    ++handshakes_;
    if (X509* peer = SSL_get1_peer_certificate(ssl)) {
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
      X509_free(peer);
      std::lock_guard lock(mu_);
      subjects_.push_back(cn);
    }
    backend = ConnectLoopback(backend_port_);
  }
  char buf[16 * 1024];
  while (backend >= 0) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {backend, POLLIN, 0}};
    if (SSL_pending(ssl) == 0 && ::poll(fds, 2, 100) < 0) break;
    if (SSL_pending(ssl) > 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const int n = SSL_read(ssl, buf, sizeof(buf));
      if (n <= 0 || !SendAll(backend, buf, static_cast<size_t>(n))) break;
    }
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = ::read(backend, buf, sizeof(buf));
      if (n <= 0 || SSL_write(ssl, buf, static_cast<int>(n)) <= 0) break;
    }
    std::lock_guard lock(mu_);
    if (stopping_) break;
  }
  SSL_shutdown(ssl);  // close_notify, best effort
  SSL_free(ssl);
  if (backend >= 0) ::close(backend);
  {
    std::lock_guard lock(mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    ::close(fd);
  }
}

}  // namespace dcm::testing
