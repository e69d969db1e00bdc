// A tiny HttpServer serving a fixed ~600 B JSON body, for wrk: the plain vs TLS cost of the
// server itself, without DCM's handlers.
//   build/tests/bench/http_server_bench [--listen 127.0.0.1:18095] [--threads 1]
//       [--tls-cert-file F --tls-key-file F]
//   wrk -t1 -c64 -d10s --latency http://127.0.0.1:18095/   (https:// with TLS)
// Prints "listening PORT" on stdout, serves until SIGINT/SIGTERM.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "src/http/server.h"

int main(int argc, char** argv) {
  dcm::http::ServerOptions options;
  std::string listen = "127.0.0.1:18095";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--listen") {
      listen = value;
    } else if (flag == "--threads") {
      options.threads = std::stoi(value);
    } else if (flag == "--tls-cert-file") {
      options.tls_cert_file = value;
    } else if (flag == "--tls-key-file") {
      options.tls_key_file = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::string body = R"({"id":"0b7c6f2e-1d7a-4c1e-9a55-3f0c2a9e8b11","name":"bench-provider",)";
  while (body.size() < 590) body += R"("pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",)";
  body += R"("end":true})";
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before the workers start: they inherit it
  auto server = dcm::http::HttpServer::Create(options);
  if (!server) {
    std::fprintf(stderr, "%s\n", server.error().message.c_str());
    return 1;
  }
  auto port = (*server)->Listen(listen, [&body](dcm::http::HttpRequest, dcm::http::Respond r) {
    r(dcm::http::HttpResponse{200, "application/json", body, {}});
  });
  if (!port) {
    std::fprintf(stderr, "%s\n", port.error().message.c_str());
    return 1;
  }
  std::printf("listening %u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Stop();
  return 0;
}
