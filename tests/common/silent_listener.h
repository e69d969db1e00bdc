// A loopback listener nobody accepts from, for tests that must prove no connection was made
// (the outbound policy, redirects not followed): Offered() says whether one reached it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace dcm::testing {

class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 16);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  uint16_t port() const { return port_; }
  // True if a connection is waiting in the backlog (polls 50 ms).
  bool Offered() const {
    pollfd pfd{fd_, POLLIN, 0};
    return ::poll(&pfd, 1, 50) == 1;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace dcm::testing
