// Watch-stream load (issue #15): many SSE watchers on one epoll thread, optional stalled watchers
// that never read, and a paced writer (new registrations plus updates of one provider), against a
// running `dcm serve`. One JSON line at the end; scripts/bench-watch.sh drives it.
//
//   watch_load --port 8080 --duration 20
//     --watch '/api/v1alpha1/events?watch=true&subject=ID' --count 1000
//     --watch '/api/v1alpha1/events?watch=true' --count 100
//     --stalled '/api/v1alpha1/events?watch=true' --count 1
//     --register-rate 190 --update-id ID --update-rate 10
//
// Latency is receipt time minus the CloudEvent's `time` (both this machine's wall clock), per
// message of an event timed after `--warmup` seconds of writes; per group: connections, messages
// (min/max per connection), p50/p99/max. The writes last `--duration` seconds (warm-up included),
// then the watches are read for 3 s more. Without writes (`--register-rate 0`, e.g. while wrk
// loads the server) it only watches for the duration.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::system_clock;

double NowMs() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

// "2026-11-27T04:00:00.123Z" (or without the fraction) as ms since the epoch; -1 if malformed.
double ParseTimeMs(const char* s, size_t n) {
  if (n < 20) return -1;
  std::tm tm{};
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec) != 6) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double ms = static_cast<double>(timegm(&tm)) * 1000.0;
  if (s[19] == '.') {
    double scale = 100;
    for (size_t i = 20; i < n && s[i] >= '0' && s[i] <= '9'; ++i, scale /= 10) {
      ms += (s[i] - '0') * scale;
    }
  }
  return ms;
}

// A connected socket to 127.0.0.1:port; `rcvbuf` > 0 shrinks its receive buffer first.
int Connect(int port, int rcvbuf = 0) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

struct Group {
  double record_from_ms = 0;  // latencies of events timed before this are not recorded (warm-up)
  std::string path;
  int count = 0;
  bool stalled = false;
  std::vector<double> latencies;
  std::vector<long> messages;  // per connection
  int refused = 0;             // non-200 answers (e.g. 503 at the stream cap)
  int ended = 0;               // streams the server closed
};

// One watch: de-chunks the response body and splits it into SSE messages.
struct Watch {
  Group* group = nullptr;
  size_t index = 0;
  int fd = -1;
  bool headers_done = false;
  bool closed = false;
  std::string raw;   // undecoded bytes
  std::string body;  // de-chunked SSE text not yet split into messages
  long messages = 0;

  void Feed(const char* p, size_t n, double now_ms) {
    raw.append(p, n);
    if (!headers_done) {
      size_t end = raw.find("\r\n\r\n");
      if (end == std::string::npos) return;
      if (raw.compare(0, 12, "HTTP/1.1 200") != 0) {
        ++group->refused;
        closed = true;
        return;
      }
      headers_done = true;
      raw.erase(0, end + 4);
    }
    Dechunk();
    Split(now_ms);
  }

  void Dechunk() {
    size_t pos = 0;
    while (true) {
      size_t eol = raw.find("\r\n", pos);
      if (eol == std::string::npos) break;
      size_t size = std::strtoul(raw.c_str() + pos, nullptr, 16);
      if (size == 0) {
        closed = true;
        pos = raw.size();
        break;
      }
      if (raw.size() < eol + 2 + size + 2) break;
      body.append(raw, eol + 2, size);
      pos = eol + 2 + size + 2;
    }
    raw.erase(0, pos);
  }

  void Split(double now_ms) {
    size_t pos = 0;
    while (true) {
      size_t end = body.find("\n\n", pos);
      if (end == std::string::npos) break;
      std::string_view msg(body.data() + pos, end - pos);
      pos = end + 2;
      // Only messages with data count (not keep-alive comments or the `retry:` preamble).
      if (msg.rfind("data:", 0) != 0 && msg.find("\ndata:") == std::string_view::npos) continue;
      ++messages;
      size_t t = msg.find("\"time\":\"");
      if (t == std::string_view::npos) continue;
      double ms = ParseTimeMs(msg.data() + t + 8, msg.size() - t - 8);
      if (ms >= group->record_from_ms) group->latencies.push_back(now_ms - ms);
    }
    body.erase(0, pos);
  }
};

std::string WatchRequest(const std::string& path) {
  return "GET " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nConnection: "
         "keep-alive\r\n\r\n";
}

// A keep-alive client that sends one request at a time and reads the whole answer.
struct Writer {
  int port;
  int fd = -1;
  std::string buf;

  int Request(const std::string& req) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (fd < 0) fd = Connect(port);
      if (fd < 0) return -1;
      if (SendAll(fd, req)) {
        int status = ReadAnswer();
        if (status > 0) return status;
      }
      close(fd);
      fd = -1;
    }
    return -1;
  }

  int ReadAnswer() {
    buf.clear();
    char tmp[8192];
    size_t need = std::string::npos;
    while (true) {
      size_t end = buf.find("\r\n\r\n");
      if (end != std::string::npos && need == std::string::npos) {
        size_t cl = buf.find("Content-Length:");
        if (cl == std::string::npos) cl = buf.find("content-length:");
        size_t len = cl == std::string::npos ? 0 : std::strtoul(buf.c_str() + cl + 15, nullptr, 10);
        need = end + 4 + len;
      }
      if (need != std::string::npos && buf.size() >= need) break;
      ssize_t n = recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return -1;
      buf.append(tmp, static_cast<size_t>(n));
    }
    return std::atoi(buf.c_str() + 9);
  }
};

struct WriterStats {
  std::atomic<long> sent{0}, ok{0}, failed{0};
};

std::string JsonRequest(const char* method, const std::string& path, const std::string& body) {
  return std::string(method) + " " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Paced writes: `rate` per second from one thread, open loop (a late request goes at once).
void Pace(int port, double rate, double seconds, WriterStats* stats, std::atomic<bool>* stop,
          const std::function<std::string(long)>& make, int ok_status) {
  if (rate <= 0) return;
  Writer w{port, -1, {}};
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; !stop->load(); ++i) {
    auto due = start + std::chrono::duration<double>(i / rate);
    if (std::chrono::duration<double>(due - start).count() >= seconds) break;
    std::this_thread::sleep_until(due);
    ++stats->sent;
    int status = w.Request(make(i));
    if (status == ok_status) {
      ++stats->ok;
    } else {
      ++stats->failed;
    }
  }
  if (w.fd >= 0) close(w.fd);
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  int port = 8080;
  double duration = 20, warmup = 0, register_rate = 0, update_rate = 0;
  int writers = 4;
  std::string update_id;
  std::vector<std::unique_ptr<Group>> groups;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--port")
      port = std::atoi(v.c_str());
    else if (k == "--duration")
      duration = std::atof(v.c_str());
    else if (k == "--warmup")
      warmup = std::atof(v.c_str());
    else if (k == "--watch" || k == "--stalled") {
      groups.push_back(std::make_unique<Group>());
      groups.back()->path = v;
      groups.back()->stalled = k == "--stalled";
    } else if (k == "--count" && !groups.empty())
      groups.back()->count = std::atoi(v.c_str());
    else if (k == "--register-rate")
      register_rate = std::atof(v.c_str());
    else if (k == "--writers")
      writers = std::atoi(v.c_str());
    else if (k == "--update-id")
      update_id = v;
    else if (k == "--update-rate")
      update_rate = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }

  int ep = epoll_create1(0);
  std::vector<std::unique_ptr<Watch>> watches;
  std::vector<int> stalled_fds;
  for (auto& g : groups) {
    g->messages.assign(static_cast<size_t>(g->count), 0);
    for (int i = 0; i < g->count; ++i) {
      int fd = Connect(port, g->stalled ? 4096 : 0);
      if (fd < 0) {
        std::fprintf(stderr, "connect failed after %zu watches\n", watches.size());
        return 1;
      }
      if (g->stalled) {
        SendAll(fd, WatchRequest(g->path));
        stalled_fds.push_back(fd);
        continue;
      }
      SendAll(fd, WatchRequest(g->path));
      auto w = std::make_unique<Watch>();
      w->group = g.get();
      w->index = static_cast<size_t>(i);
      w->fd = fd;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = w.get();
      epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
      watches.push_back(std::move(w));
    }
  }
  // Let every watch go live (a watch without `since` starts now) before the writes begin.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  for (auto& g : groups) g->record_from_ms = NowMs() + warmup * 1000;
  std::atomic<bool> stop{false};
  WriterStats reg, upd;
  std::vector<std::thread> threads;
  const std::string prefix = "wl-" + std::to_string(getpid()) + "-";
  for (int t = 0; t < writers && register_rate > 0; ++t) {
    threads.emplace_back([&, t] {
      Pace(
          port, register_rate / writers, duration, &reg, &stop,
          [&](long i) {
            std::string name = prefix + std::to_string(t) + "-" + std::to_string(i);
            return JsonRequest(
                "POST", "/api/v1alpha1/providers",
                "{\"name\":\"" + name +
                    "\",\"endpoint\":\"http://127.0.0.1:9/api\",\"service_type\":\"vm\"}");
          },
          201);
    });
  }
  if (!update_id.empty()) {
    threads.emplace_back([&] {
      Pace(
          port, update_rate, duration, &upd, &stop,
          [&](long i) {
            return JsonRequest(
                "PUT", "/api/v1alpha1/providers/" + update_id,
                "{\"name\":\"watched-" + update_id +
                    "\",\"endpoint\":\"http://127.0.0.1:9/api\",\"service_type\":\"vm\","
                    "\"metadata\":{\"rev\":" +
                    std::to_string(i) + "}}");
          },
          200);
    });
  }

  // Read until the writes end plus a drain of 3 s (settle and lag).
  const double end_ms = NowMs() + duration * 1000 + 3000;
  std::vector<epoll_event> events(1024);
  std::vector<char> buf(1 << 16);
  while (NowMs() < end_ms) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    double now = NowMs();
    for (int i = 0; i < n; ++i) {
      auto* w = static_cast<Watch*>(events[static_cast<size_t>(i)].data.ptr);
      ssize_t got = recv(w->fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (got > 0) {
        w->Feed(buf.data(), static_cast<size_t>(got), now);
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        w->closed = true;
      }
      if (w->closed) {
        ++w->group->ended;
        epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, nullptr);
      }
    }
  }
  stop = true;
  for (auto& t : threads) t.join();

  // A stalled watch the server cut off reads EOF once its socket buffer is drained.
  int stalled_cut = 0;
  for (int fd : stalled_fds) {
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (true) {
      ssize_t got = recv(fd, buf.data(), buf.size(), 0);
      if (got == 0) {
        ++stalled_cut;
        break;
      }
      if (got < 0) break;
    }
  }

  for (auto& w : watches) w->group->messages[w->index] = w->messages;
  std::printf(
      "{\"duration_s\":%.1f,\"registrations\":{\"sent\":%ld,\"ok\":%ld,\"failed\":%ld},"
      "\"updates\":{\"sent\":%ld,\"ok\":%ld,\"failed\":%ld},\"stalled_cut_off\":%d,"
      "\"stalled\":%zu,\"groups\":[",
      duration, reg.sent.load(), reg.ok.load(), reg.failed.load(), upd.sent.load(), upd.ok.load(),
      upd.failed.load(), stalled_cut, stalled_fds.size());
  bool first = true;
  for (auto& g : groups) {
    if (g->stalled) continue;
    auto [mn, mx] =
        g->messages.empty()
            ? std::pair<long, long>{0, 0}
            : std::pair<long, long>{*std::min_element(g->messages.begin(), g->messages.end()),
                                    *std::max_element(g->messages.begin(), g->messages.end())};
    double p50 = Percentile(g->latencies, 0.50), p99 = Percentile(g->latencies, 0.99);
    double mxl =
        g->latencies.empty() ? 0 : *std::max_element(g->latencies.begin(), g->latencies.end());
    std::printf(
        "%s{\"path\":\"%s\",\"connections\":%d,\"refused\":%d,\"ended\":%d,"
        "\"timed_messages\":%zu,\"per_connection_min\":%ld,\"per_connection_max\":%ld,"
        "\"latency_ms\":{\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}}",
        first ? "" : ",", g->path.c_str(), g->count, g->refused, g->ended, g->latencies.size(), mn,
        mx, p50, p99, mxl);
    first = false;
  }
  std::printf("]}\n");
  return 0;
}
