// `dcm events`: reads the event topics directly (SPEC §3.4) with consumers/event_reader.h, from
// the beginning or since a time, by subject and type, as JSON lines or a table. Works against
// a real cluster (--kafka-brokers / KAFKA_BROKERS) and against dev mode (--server reads the
// bootstrap address and topics from a running `dcm serve`'s /admin/info).
//
// Exit codes: 0 done; 1 Kafka or the server unreachable (bounded by --timeout); 2 bad flags.
// stdout carries only events; progress, warnings and the final count go to stderr.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "consumers/event_reader.h"
#include "events/event_summary.h"
#include "events/json_read.h"
#include "src/cli/commands.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/common/time_format.h"
#include "src/http/client.h"

namespace dcm::cli {
namespace {

constexpr int kExitUnavailable = 1;
constexpr int kExitBadFlags = 2;

struct EventsFlags {
  std::string kafka_brokers;
  std::string server;
  std::string token;           // bearer token for --server (GET /admin/info needs dcm-admin)
  std::string server_ca_file;  // verifies an https --server
  std::string topic_prefix = "dcm.";
  std::vector<std::string> topics;
  std::string since;
  std::string until;
  std::string subject;
  std::string type;
  std::string output = "json";
  bool follow = false;
  std::vector<std::string> kafka_properties;
  std::string timeout = "10s";
  bool verbose = false;
};

// A failure with its exit code and message for stderr.
struct Failure {
  int exit_code;
  std::string message;
};

template <class T>
using Outcome = tl::expected<T, Failure>;

tl::unexpected<Failure> Fail(int exit_code, std::string message) {
  return tl::unexpected<Failure>(Failure{exit_code, std::move(message)});
}

// RFC 3339, or a Go duration meaning that long before now ("15m").
Outcome<std::optional<int64_t>> ParseTimeFlag(const std::string& flag, const std::string& text,
                                              int64_t now_ms) {
  if (text.empty()) return std::optional<int64_t>();
  if (auto ms = ParseRfc3339(text)) return std::optional<int64_t>(*ms);
  if (auto ago = ParseGoDuration(text)) return std::optional<int64_t>(now_ms - ago->count());
  return Fail(kExitBadFlags, flag + ": expected an RFC 3339 time (2026-01-01T00:00:00Z) or a " +
                                 "duration before now (15m, 2h), got '" + text + "'");
}

// The event topics of a prefix: every topic but the dead-letter one (SPEC §4).
std::vector<std::string> DefaultTopics(const std::string& prefix) {
  Topics t;
  t.prefix = prefix;
  return t.EventTopics();
}

struct ServerInfo {
  std::string brokers;
  std::vector<std::string> topics;
  bool dev_mode = false;
};

Outcome<ServerInfo> ReadServerInfo(std::string server, const EventsFlags& flags,
                                   std::chrono::milliseconds timeout) {
  while (server.ends_with('/')) server.pop_back();
  http::HttpClientOptions options;
  if (!flags.server_ca_file.empty()) {
    auto tls = http::TlsClientContext::Create({flags.server_ca_file, false, "", ""});
    if (!tls) return Fail(kExitBadFlags, "--server-ca-file: " + tls.error().message);
    options.tls = std::move(*tls);
  }
  if (!flags.token.empty()) options.headers.emplace_back("Authorization", "Bearer " + flags.token);
  auto response = http::Fetch("GET", server + "/admin/info", "", timeout, std::move(options));
  if (!response) {
    return Fail(kExitUnavailable,
                "cannot reach dcm serve at " + server + ": " + response.error().message);
  }
  if (response->status != 200) {
    return Fail(kExitUnavailable,
                server + "/admin/info answered " + std::to_string(response->status));
  }
  auto parsed = ParseJson(response->body);
  if (!parsed || !parsed->is_object()) {
    return Fail(kExitUnavailable, server + "/admin/info: not a JSON object");
  }
  const simdjson::dom::object object(*parsed);
  ServerInfo info;
  info.brokers = StringMember(object, "kafka_bootstrap_servers");
  bool dev = false;
  if (auto d = Member(object, "dev_mode"); d && !d->get(dev)) info.dev_mode = dev;
  if (auto topics = Member(object, "topics"); topics && topics->is_array()) {
    for (auto t : simdjson::dom::array(*topics)) {
      std::string_view name;
      if (!t.get(name) && !name.ends_with("dead-letter")) info.topics.emplace_back(name);
    }
  }
  if (info.brokers.empty()) {
    return Fail(kExitUnavailable, server + "/admin/info names no kafka_bootstrap_servers");
  }
  return info;
}

struct Plan {
  KafkaOptions kafka;
  EventReaderOptions reader;
  bool table = false;
};

Outcome<Plan> MakePlan(const EventsFlags& flags) {
  Plan plan;
  if (flags.output != "json" && flags.output != "table") {
    return Fail(kExitBadFlags, "--output must be json or table, got '" + flags.output + "'");
  }
  plan.table = flags.output == "table";
  auto timeout = ParseGoDuration(flags.timeout);
  if (!timeout || timeout->count() <= 0) {
    return Fail(kExitBadFlags,
                "--timeout: expected a positive duration (10s), got '" + flags.timeout + "'");
  }
  const int64_t now = SystemClock::Instance().NowMillis();
  auto since = ParseTimeFlag("--since", flags.since, now);
  if (!since) return tl::unexpected(since.error());
  auto until = ParseTimeFlag("--until", flags.until, now);
  if (!until) return tl::unexpected(until.error());
  if (*since && *until && **until < **since) {
    return Fail(kExitBadFlags, "--until is before --since");
  }
  if (flags.follow && *until) return Fail(kExitBadFlags, "--until cannot be used with --follow");
  plan.reader.since_ms = *since;
  plan.reader.until_ms = *until;
  plan.reader.subject = flags.subject;
  plan.reader.type = flags.type;
  plan.reader.follow = flags.follow;
  plan.reader.query_timeout_ms = static_cast<int>(timeout->count());
  plan.reader.stall_timeout_ms = std::max(plan.reader.query_timeout_ms, 5000);

  plan.kafka.client_id = "dcm-events";
  plan.kafka.brokers = flags.kafka_brokers;
  plan.reader.topics = flags.topics;
  if (!flags.server.empty()) {
    auto info = ReadServerInfo(flags.server, flags, *timeout);
    if (!info) return tl::unexpected(info.error());
    if (plan.kafka.brokers.empty()) plan.kafka.brokers = info->brokers;
    if (plan.reader.topics.empty()) plan.reader.topics = info->topics;
    // The embedded mock answers an empty fetch only after the full long-poll.
    if (info->dev_mode) plan.kafka.fetch_wait_max_ms = 10;
  }
  if (plan.kafka.brokers.empty()) {
    return Fail(kExitBadFlags, "no Kafka to read: give --kafka-brokers, KAFKA_BROKERS or --server");
  }
  if (plan.reader.topics.empty()) plan.reader.topics = DefaultTopics(flags.topic_prefix);
  // librdkafka logs every failed connection attempt; the command reports its own clear error.
  if (!flags.verbose) plan.kafka.extra["log_level"] = "2";
  if (auto error = AddKafkaProperties(flags.kafka_properties, plan.kafka.extra)) {
    return Fail(kExitBadFlags, *error);
  }
  return plan;
}

// Display width of UTF-8 text: code points (every character we print is one column wide).
size_t Width(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

std::string Cell(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return text;
}

struct TableRow {
  std::string time, type, subject, actor, summary;
};

TableRow RowOf(const ReadEvent& e) {
  return {FormatRfc3339Millis(e.time_ms), Cell(e.event.type), Cell(e.event.subject),
          Cell(e.event.actor.empty() ? "-" : e.event.actor), SummarizeEvent(e.event)};
}

// Columns TIME, TYPE, SUBJECT, ACTOR, SUMMARY separated by two spaces. TYPE, SUBJECT and ACTOR
// are padded to their widths; a longer value is printed whole (that row's alignment gives). The
// last column is never padded, so no line ends in spaces. ACTOR is "-" for events from before
// the actor attribute.
class TableWriter {
 public:
  TableWriter(size_t type_width, size_t subject_width, size_t actor_width)
      : type_width_(type_width), subject_width_(subject_width), actor_width_(actor_width) {}

  // Widths from the rows themselves (header included), the subject capped at a UUID's 36 and
  // the actor at 24.
  static TableWriter Fitting(const std::vector<TableRow>& rows) {
    size_t type = 4, subject = 7, actor = 5;
    for (const auto& r : rows) {
      type = std::max(type, Width(r.type));
      subject = std::max(subject, std::min<size_t>(Width(r.subject), 36));
      actor = std::max(actor, std::min<size_t>(Width(r.actor), 24));
    }
    return TableWriter(type, subject, actor);
  }

  std::string Header() const { return Line({"TIME", "TYPE", "SUBJECT", "ACTOR", "SUMMARY"}); }

  std::string Line(const TableRow& r) const {
    std::string out = Pad(r.time, 24) + "  " + Pad(r.type, type_width_) + "  " +
                      Pad(r.subject, subject_width_) + "  " + Pad(r.actor, actor_width_) + "  " +
                      r.summary;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  }

 private:
  static std::string Pad(const std::string& text, size_t width) {
    const size_t w = Width(text);
    return w >= width ? text : text + std::string(width - w, ' ');
  }
  size_t type_width_;
  size_t subject_width_;
  size_t actor_width_;
};

// The record as stored, on one line: minified only if it is not already (a record produced by
// hand, say with kcat from a pretty-printed file).
std::string JsonLine(const ReadEvent& e) {
  const bool one_line = e.raw.find_first_of("\r\n") == std::string::npos && !e.raw.empty() &&
                        e.raw.front() == '{' && e.raw.back() == '}';
  if (one_line) return e.raw + "\n";
  auto parsed = ParseJson(e.raw);
  return (parsed ? Minify(*parsed) : EncodeCloudEvent(e.event)) + "\n";
}

bool Write(const std::string& text) {
  return fwrite(text.data(), 1, text.size(), stdout) == text.size();
}

void PrintStats(const ReadStats& stats, const EventReaderOptions& options) {
  for (const auto& topic : stats.missing_topics) {
    fprintf(stderr, "dcm events: topic %s does not exist (skipped)\n", topic.c_str());
  }
  if (!stats.scanned_partitions.empty()) {
    fprintf(stderr,
            "dcm events: the broker cannot seek by time on %zu partition(s) (the embedded mock "
            "cannot); scanned them from the start\n",
            stats.scanned_partitions.size());
  }
  if (stats.poison > 0) {
    fprintf(stderr, "dcm events: %zu record(s) are not CloudEvents, skipped; first: %s\n",
            stats.poison, stats.poison_samples.front().c_str());
  }
  for (const auto& warning : stats.warnings) {
    fprintf(stderr, "dcm events: warning: %s\n", warning.c_str());
  }
  std::string line = std::to_string(stats.events) + " events from " +
                     std::to_string(stats.partitions) + " partitions";
  if (options.since_ms) {
    line += " (" + std::to_string(stats.skipped_before_since) + " skipped before --since)";
  }
  fprintf(stderr, "%s\n", line.c_str());
}

// Reads everything up to the high watermarks, sorts, prints.
Status ReadSorted(EventReader& reader, bool table) {
  std::vector<ReadEvent> events;
  RETURN_IF_ERROR(reader.Run([&](ReadEvent e) { events.push_back(std::move(e)); }));
  SortByEventTime(events);
  if (table) {
    std::vector<TableRow> rows;
    rows.reserve(events.size());
    for (const auto& e : events) rows.push_back(RowOf(e));
    const auto writer = TableWriter::Fitting(rows);
    Write(writer.Header());
    for (const auto& r : rows) Write(writer.Line(r));
  } else {
    for (const auto& e : events) Write(JsonLine(e));
  }
  fflush(stdout);
  return OkStatus();
}

// Prints events as they arrive until SIGINT/SIGTERM, a closed stdout, or a Kafka error.
Status ReadFollowing(EventReader& reader, bool table, const std::function<int()>& wait_signal) {
  std::thread stopper([&] {
    wait_signal();
    reader.Stop();
  });
  // The longest event type (dcm.service_type_instance.create_failed), a UUID, a short actor.
  const TableWriter writer(39, 36, 16);
  if (table) Write(writer.Header());
  fflush(stdout);
  Status status = reader.Run([&](ReadEvent e) {
    const bool ok = Write(table ? writer.Line(RowOf(e)) : JsonLine(e)) && fflush(stdout) == 0;
    if (!ok) reader.Stop();  // the reader of our stdout went away
  });
  kill(getpid(), SIGTERM);  // wakes the stopper if no signal came (it is blocked, not delivered)
  stopper.join();
  return status;
}

int RunEvents(const EventsFlags& flags) {
  std::function<int()> wait_signal;
  if (flags.follow) wait_signal = BlockTerminationSignals();
  auto plan = MakePlan(flags);
  if (!plan) {
    fprintf(stderr, "dcm events: %s\n", plan.error().message.c_str());
    return plan.error().exit_code;
  }
  auto reader = EventReader::Create(plan->kafka, plan->reader);
  if (!reader) {
    fprintf(stderr, "dcm events: %s\n", reader.error().message.c_str());
    return reader.error().code == ErrorCode::kInvalidArgument ? kExitBadFlags : kExitUnavailable;
  }
  const Status status = flags.follow ? ReadFollowing(**reader, plan->table, wait_signal)
                                     : ReadSorted(**reader, plan->table);
  if (!status) {
    fprintf(stderr, "dcm events: cannot read from Kafka at %s: %s\n", plan->kafka.brokers.c_str(),
            status.error().message.c_str());
    return kExitUnavailable;
  }
  PrintStats((*reader)->stats(), plan->reader);
  return 0;
}

}  // namespace

void RegisterEventsCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EventsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "events",
      "Read the event topics directly: from the beginning or since a time, by subject "
      "and type, as JSON lines or a table");
  cmd->add_option("--kafka-brokers", flags->kafka_brokers, "Kafka bootstrap servers host:port,...")
      ->envname("KAFKA_BROKERS");
  cmd->add_option("--server", flags->server,
                  "A running dcm serve (http://127.0.0.1:8080): read its Kafka address and "
                  "topics from /admin/info (dev mode needs no other address)");
  cmd->add_option("--token", flags->token,
                  "Bearer token for --server when it authenticates (GET /admin/info: dcm-admin)")
      ->envname("DCM_TOKEN");
  cmd->add_option("--server-ca-file", flags->server_ca_file,
                  "PEM CA bundle verifying an https --server")
      ->envname("DCM_CA_FILE");
  cmd->add_option("--topic-prefix", flags->topic_prefix, "Prefix of the default topics")
      ->envname("DCM_TOPIC_PREFIX")
      ->capture_default_str();
  cmd->add_option("--topic", flags->topics,
                  "Topic to read, full name (repeatable; default: every event topic of the "
                  "prefix, not the dead-letter topic)");
  cmd->add_option("--since", flags->since,
                  "Only events at or after this time: RFC 3339, or a duration before now (15m)");
  cmd->add_option("--until", flags->until,
                  "Only events at or before this time: RFC 3339, or a duration before now");
  cmd->add_option("--subject", flags->subject, "Only events about this subject (exact)");
  cmd->add_option("--type", flags->type,
                  "Only events of this type (exact, or a prefix ending in *: dcm.provider.*)");
  cmd->add_option("--output,-o", flags->output, "json (one CloudEvent per line) or table")
      ->capture_default_str();
  cmd->add_flag("--follow,-f", flags->follow,
                "Keep printing new events (in arrival order) until interrupted");
  cmd->add_option("--kafka-property", flags->kafka_properties,
                  "librdkafka property key=value (repeatable; e.g. security.protocol=SASL_SSL)")
      ->envname("DCM_KAFKA_PROPERTIES")
      ->delimiter(',');
  cmd->add_option("--timeout", flags->timeout,
                  "Bound on reaching the server and each Kafka query (Go duration)")
      ->capture_default_str();
  cmd->add_flag("--verbose,-v", flags->verbose, "Show librdkafka's own log lines");
  cmd->callback([flags, exit_code] {
    InitLogging(flags->verbose ? "info" : "warn");
    *exit_code = RunEvents(*flags);
  });
}

}  // namespace dcm::cli
