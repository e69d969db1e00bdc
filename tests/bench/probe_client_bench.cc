// ProbeClient at scale: R rounds of N probes to N distinct endpoints, a fraction of which never
// answer. Prints one JSON line.
//
// The servers (HttpServer, `--ports` listeners serving /p/<i>/health) run in a forked child
// process, so that (1) getrusage of this process is the client's CPU alone (plus this driver's
// Check loop and callbacks), and (2) each side has its own RLIMIT_NOFILE: with a hard limit of
// 20000, 10k client sockets and 10k server sockets would not fit in one process.
//
// Endpoint i is black-holed (the handler never responds) when floor(i*f) != floor((i+1)*f), so
// they spread evenly over the ports. Round 1 is cold (every connection is new); rounds 2..R are
// warm (healthy endpoints reuse their kept-alive connection; black-holed ones were closed at the
// deadline and reconnect). Reported per warm round, medians over warm rounds:
//   round_wall_s    first Check to last done (~ the timeout when any endpoint is black-holed)
//   healthy_wall_s  first Check to the last healthy endpoint's done
//   cpu_us_per_probe  getrusage(RUSAGE_SELF) user+sys of this process per probe; on loopback
//                   the sys part includes the servers' receive path (it runs in the sender's
//                   system call), so user_cpu_us_per_probe is reported too
//   timeout_late_ms p50/p99/max of (latency - timeout) over black-holed probes
//
//   build/tests/bench/probe_client_bench --endpoints=10000 --rounds=5 --timeout-ms=2000
//
// Flags: --endpoints --rounds --blackhole --timeout-ms --ports --client-threads
// --server-threads --idle-cap (0 = derived) --reset-on-close (1/0) --pause-ms (between rounds).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "src/common/json_writer.h"
#include "src/http/probe_client.h"
#include "src/http/server.h"

namespace dcm::http {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int endpoints = 10000;
  int rounds = 5;
  double blackhole = 0.1;
  int timeout_ms = 2000;
  int ports = 8;
  int client_threads = 1;
  int server_threads = 1;
  size_t idle_cap = 0;
  bool reset_on_close = true;
  int pause_ms = 0;
};

bool ParseFlag(const std::string& arg, const char* name, std::string* value) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    if (ParseFlag(arg, "endpoints", &v)) {
      f.endpoints = std::stoi(v);
    } else if (ParseFlag(arg, "rounds", &v)) {
      f.rounds = std::stoi(v);
    } else if (ParseFlag(arg, "blackhole", &v)) {
      f.blackhole = std::stod(v);
    } else if (ParseFlag(arg, "timeout-ms", &v)) {
      f.timeout_ms = std::stoi(v);
    } else if (ParseFlag(arg, "ports", &v)) {
      f.ports = std::stoi(v);
    } else if (ParseFlag(arg, "client-threads", &v)) {
      f.client_threads = std::stoi(v);
    } else if (ParseFlag(arg, "server-threads", &v)) {
      f.server_threads = std::stoi(v);
    } else if (ParseFlag(arg, "idle-cap", &v)) {
      f.idle_cap = std::stoul(v);
    } else if (ParseFlag(arg, "reset-on-close", &v)) {
      f.reset_on_close = v != "0";
    } else if (ParseFlag(arg, "pause-ms", &v)) {
      f.pause_ms = std::stoi(v);
    } else {
      std::fprintf(stderr, "unknown flag %s (see the comment at the top of the source)\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  return f;
}

bool BlackHoled(int i, double fraction) {
  return static_cast<long>(i * fraction) != static_cast<long>((i + 1) * fraction);
}

double Seconds(const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return Seconds(ru.ru_utime) + Seconds(ru.ru_stime);
}

// User time only: on loopback the kernel time also carries the server side of every packet
// (the receive path runs inline in the sender's system call).
double UserSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return Seconds(ru.ru_utime);
}

double RssMiB(const char* field = "VmRSS:") {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  }
  return 0;
}

// Sockets in TIME_WAIT (state 06) on this host's network namespace, both address families.
int TimeWaitSockets() {
  int count = 0;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state;
      fields >> sl >> local >> remote >> state;
      if (state == "06") ++count;
    }
  }
  return count;
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// The child: serves until its control pipe closes, then reports "cpu_s rss_mib" and exits.
[[noreturn]] void RunServers(const Flags& flags, int control_fd, int report_fd) {
  ServerOptions options;
  options.threads = flags.server_threads;
  options.handler_timeout = std::chrono::hours(1);  // black-holed requests just wait
  options.idle_timeout = std::chrono::hours(1);
  auto server = HttpServer::Create(options);
  if (!server) {
    std::fprintf(stderr, "server: %s\n", server.error().message.c_str());
    std::_Exit(1);
  }
  const double fraction = flags.blackhole;
  Handler handler = [fraction](HttpRequest req, Respond respond) {
    // "/p/<i>/health"
    const int i = std::atoi(req.path.c_str() + 3);
    if (BlackHoled(i, fraction)) return;  // never answers (the connection waits for an hour)
    respond(HttpResponse{200, "application/json", R"({"status":"healthy"})", {}});
  };
  std::string ports;
  for (int p = 0; p < flags.ports; ++p) {
    auto port = (*server)->Listen("127.0.0.1:0", handler);
    if (!port) {
      std::fprintf(stderr, "server: %s\n", port.error().message.c_str());
      std::_Exit(1);
    }
    ports += std::to_string(*port) + " ";
  }
  ports += "\n";
  WriteAll(report_fd, ports);
  ReadAll(control_fd);  // until the parent closes it
  const double cpu = CpuSeconds();
  const double rss = RssMiB("VmHWM:");
  (*server)->Stop();
  WriteAll(report_fd, std::to_string(cpu) + " " + std::to_string(rss) + "\n");
  std::_Exit(0);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t idx = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[idx];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  int control[2], report[2];
  if (::pipe(control) != 0 || ::pipe(report) != 0) return 1;
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::close(control[1]);
    ::close(report[0]);
    RunServers(flags, control[0], report[1]);
  }
  ::close(control[0]);
  ::close(report[1]);

  // The child's first line: its ports.
  std::string first;
  char c;
  while (::read(report[0], &c, 1) == 1 && c != '\n') first.push_back(c);
  std::vector<int> ports;
  std::istringstream port_list(first);
  for (int p; port_list >> p;) ports.push_back(p);
  if (static_cast<int>(ports.size()) != flags.ports) {
    std::fprintf(stderr, "servers did not start\n");
    return 1;
  }

  ProbeClientOptions options;
  options.threads = flags.client_threads;
  options.max_idle_connections = flags.idle_cap;
  options.reset_on_close = flags.reset_on_close;
  auto created = ProbeClient::Create(options);
  if (!created) {
    std::fprintf(stderr, "client: %s\n", created.error().message.c_str());
    return 1;
  }
  ProbeClient& client = **created;

  const int n = flags.endpoints;
  std::vector<std::string> urls(n);
  std::vector<std::string> keys(n);
  for (int i = 0; i < n; ++i) {
    urls[i] = "http://127.0.0.1:" + std::to_string(ports[i % ports.size()]) + "/p/" +
              std::to_string(i) + "/health";
    keys[i] = "sp-" + std::to_string(i);
  }

  struct Slot {
    ProbeFailure failure = ProbeFailure::kNone;
    int status = 0;
    int64_t latency_us = 0;
    double done_at_s = 0;
    std::string error;
  };
  std::vector<double> walls, healthy_walls, cpus, users, late_ms;
  std::map<std::string, int> unexpected;  // warm rounds: "healthy:<failure>" / "blackholed:..."
  double cold_wall = 0;
  for (int round = 0; round < flags.rounds; ++round) {
    std::vector<Slot> slots(n);
    std::mutex mu;
    std::condition_variable cv;
    int remaining = n;
    const double cpu0 = CpuSeconds();
    const double user0 = UserSeconds();
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      client.Check(ProbeRequest{keys[i], urls[i], std::chrono::milliseconds(flags.timeout_ms)},
                   [&, i](ProbeResponse r) {
                     Slot& s = slots[i];
                     s.failure = r.failure;
                     s.status = r.http_status;
                     s.latency_us = r.latency_us;
                     s.error = std::move(r.error);
                     s.done_at_s = std::chrono::duration<double>(Clock::now() - start).count();
                     std::lock_guard lock(mu);
                     if (--remaining == 0) cv.notify_one();
                   });
    }
    const double issued_s = std::chrono::duration<double>(Clock::now() - start).count();
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return remaining == 0; });
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = CpuSeconds() - cpu0;
    const double user = UserSeconds() - user0;
    double healthy_wall = 0;
    for (int i = 0; i < n; ++i) {
      const Slot& s = slots[i];
      const bool hole = BlackHoled(i, flags.blackhole);
      if (!hole) healthy_wall = std::max(healthy_wall, s.done_at_s);
      if (round == 0) continue;
      if (hole) {
        if (s.failure == ProbeFailure::kTimeout) {
          late_ms.push_back(s.latency_us / 1000.0 - flags.timeout_ms);
        } else {
          ++unexpected["blackholed: " + s.error];
        }
      } else if (s.failure != ProbeFailure::kNone || s.status != 200) {
        ++unexpected["healthy: " + (s.error.empty() ? std::to_string(s.status) : s.error)];
      }
    }
    std::vector<double> healthy_ms;
    double first_done = wall;
    for (const Slot& s : slots) first_done = std::min(first_done, s.done_at_s);
    for (int i = 0; i < n; ++i) {
      if (!BlackHoled(i, flags.blackhole)) healthy_ms.push_back(slots[i].latency_us / 1000.0);
    }
    std::fprintf(stderr,
                 "round %d: issued in %.3f s, first done %.3f s, wall %.3f s, healthy %.3f s "
                 "(latency ms p10 %.1f p50 %.1f p90 %.1f), "
                 "cpu %.1f us/probe, idle %zu\n",
                 round + 1, issued_s, first_done, wall, healthy_wall, Percentile(healthy_ms, 0.1),
                 Percentile(healthy_ms, 0.5), Percentile(healthy_ms, 0.9), cpu * 1e6 / n,
                 client.IdleConnections());
    if (round == 0) {
      cold_wall = wall;
    } else {
      walls.push_back(wall);
      healthy_walls.push_back(healthy_wall);
      cpus.push_back(cpu * 1e6 / n);
      users.push_back(user * 1e6 / n);
    }
    if (flags.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(flags.pause_ms));
  }
  const double client_rss = RssMiB();
  const double client_hwm = RssMiB("VmHWM:");
  const size_t idle = client.IdleConnections();
  const int time_wait = TimeWaitSockets();
  client.Stop();
  ::close(control[1]);  // the child reports and exits
  double server_cpu = 0, server_rss = 0;
  std::istringstream(ReadAll(report[0])) >> server_cpu >> server_rss;
  int status = 0;
  ::waitpid(child, &status, 0);

  JsonWriter w;
  auto number = [&w](std::string_view key, double value) {
    w.Key(key);
    w.Double(value);
  };
  w.BeginObject();
  w.Field("endpoints", n);
  w.Field("rounds", flags.rounds);
  number("blackholed_fraction", flags.blackhole);
  w.Field("timeout_ms", flags.timeout_ms);
  w.Field("ports", flags.ports);
  w.Field("client_threads", flags.client_threads);
  w.Field("reset_on_close", flags.reset_on_close);
  w.Field("idle_cap", static_cast<int64_t>(flags.idle_cap));
  number("cold_round_wall_s", cold_wall);
  number("warm_round_wall_s", Median(walls));
  number("warm_healthy_wall_s", Median(healthy_walls));
  number("cpu_us_per_probe", Median(cpus));
  number("user_cpu_us_per_probe", Median(users));
  w.Field("cpu_note", "getrusage of the client process (servers run in a forked child)");
  number("timeout_late_ms_p50", Percentile(late_ms, 0.5));
  number("timeout_late_ms_p99", Percentile(late_ms, 0.99));
  number("timeout_late_ms_max", Percentile(late_ms, 1.0));
  w.Key("unexpected");
  w.BeginObject();
  for (const auto& [what, count] : unexpected) w.Field(what, count);
  w.EndObject();
  w.Field("idle_connections", static_cast<int64_t>(idle));
  number("client_rss_mib", client_rss);
  number("client_peak_rss_mib", client_hwm);
  number("server_peak_rss_mib", server_rss);
  number("server_cpu_us_per_request", server_cpu * 1e6 / (static_cast<double>(n) * flags.rounds));
  w.Field("time_wait_sockets", time_wait);
  w.EndObject();
  std::printf("%s\n", w.Take().c_str());
  return 0;
}

}  // namespace
}  // namespace dcm::http

int main(int argc, char** argv) { return dcm::http::Main(argc, argv); }
