// `dcm projections rebuild|verify` (SPEC §3.4, §5.4; docs/operations.md "Projections rebuild and
// verify"):
//
//   live store <data-dir>/state, read-only snapshot ─▶ each projection's stored offsets = targets
//   Kafka, every partition from its low watermark ─▶ Rebuilder (consumers/rebuild.h) ─▶ a fresh
//   side store in bulk mode ─▶ digest per projection prefix, live vs rebuilt ─▶ match, or the
//   first differing key
//
// `rebuild` keeps the side store (--out); `verify` deletes it. Without a live store, the rebuild
// goes to the high watermarks and nothing is compared. Exit 0: every projection matches; 1: a
// mismatch; 2: an error (bad flags, no data dir, Kafka unreachable within the timeouts).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>

#include "consumers/rebuild.h"
#include "src/cli/commands.h"
#include "src/common/log.h"

namespace dcm::cli {
namespace {

struct ProjectionsFlags {
  std::string data_dir;
  std::string kafka_brokers;
  std::string topic_prefix = "dcm.";
  std::vector<std::string> kafka_properties;  // librdkafka key=value
  std::vector<std::string> projections;       // empty = all
  std::string out;
  bool no_progress = false;
  // Consumer long-poll; the mock waits the whole of it on an empty fetch (KAFKA-NOTES).
  int fetch_wait_max_ms = 100;
  // Seconds without a single event while short of the targets before giving up (never hang).
  int timeout_s = 30;
  std::string log_level = "warn";
  std::vector<std::string> extras;  // unknown arguments: exit 2, like every other bad flag
};

constexpr size_t kShownValueBytes = 160;

int Fail(const char* verb, const std::string& message) {
  fprintf(stderr, "dcm projections %s: %s\n", verb, message.c_str());
  return 2;
}

// Bytes as printable ASCII: \\, \xNN for the rest; truncated after `max` input bytes.
std::string Printable(std::string_view bytes, size_t max = std::string::npos) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (bytes.size() > max) out += fmt::format("... ({} bytes)", bytes.size());
  return out;
}

std::string Value(const std::optional<std::string>& value) {
  return value ? "\"" + Printable(*value, kShownValueBytes) + "\"" : "(absent)";
}

std::string Thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

std::string UtcStamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// A bar redrawn in place on a terminal, else a plain line every few seconds.
std::function<void(const RebuildProgress&)> ProgressPrinter(bool tty) {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [tty, last](const RebuildProgress& p) {
    const double fraction =
        p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
    const bool done = p.done >= p.total;
    const std::string eta = done ? "done" : "ETA " + Duration(p.eta_s);
    if (tty) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(fraction * kWidth);
      fprintf(stderr, "\r[%s%s] %3d%%  %s/%s events  %s events/s  %s   ",
              std::string(static_cast<size_t>(filled), '#').c_str(),
              std::string(static_cast<size_t>(kWidth - filled), '.').c_str(),
              static_cast<int>(fraction * 100), Thousands(p.done).c_str(),
              Thousands(p.total).c_str(), Thousands(static_cast<int64_t>(p.events_per_s)).c_str(),
              eta.c_str());
      if (done) fprintf(stderr, "\n");
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!done && now - *last < std::chrono::seconds(5)) return;
    *last = now;
    fprintf(stderr, "rebuild: %s/%s events (%d%%), %s events/s, %s\n", Thousands(p.done).c_str(),
            Thousands(p.total).c_str(), static_cast<int>(fraction * 100),
            Thousands(static_cast<int64_t>(p.events_per_s)).c_str(), eta.c_str());
  };
}

struct Selected {
  std::vector<size_t> indexes;  // into the projection set
};

Result<Selected> SelectProjections(const std::vector<ProjectionEntry>& specs,
                                   const std::vector<std::string>& names) {
  Selected selected;
  std::string known;
  for (const auto& spec : specs) known += (known.empty() ? "" : ", ") + spec.name;
  const std::set<std::string> named(names.begin(), names.end());
  std::set<std::string> wanted = named;  // what is left once the known names are taken out
  for (size_t i = 0; i < specs.size(); ++i) {
    if (named.empty() || wanted.erase(specs[i].name) > 0) selected.indexes.push_back(i);
  }
  if (!wanted.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown projection '" + *wanted.begin() + "' (known: " + known + ")");
  }
  return selected;
}

// Everything the live store holds that no selected projection owns: reported, never compared.
void PrintNotCompared(const Store& live, const std::vector<ProjectionEntry>& specs) {
  auto prefixes = live.TopLevelPrefixes();
  if (!prefixes) return;
  std::set<std::string> owned = {"__offset/"};
  for (const auto& spec : specs) owned.insert(spec.prefix);
  std::string other;
  for (const auto& prefix : *prefixes) {
    if (!owned.count(prefix)) other += (other.empty() ? "" : ", ") + Printable(prefix);
  }
  if (!other.empty()) {
    printf("not rebuilt or compared (worker state, not projections): %s\n", other.c_str());
  }
}

int Run(const ProjectionsFlags& flags, bool verify) {
  const char* verb = verify ? "verify" : "rebuild";
  InitLogging(flags.log_level);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!flags.extras.empty()) return Fail(verb, "unexpected argument '" + flags.extras[0] + "'");
  if (flags.data_dir.empty()) return Fail(verb, "--data-dir is required");
  if (!fs::is_directory(flags.data_dir, ec)) {
    return Fail(verb, "no data dir " + flags.data_dir);
  }
  if (flags.kafka_brokers.empty()) {
    return Fail(verb, "no Kafka: give --kafka-brokers or set KAFKA_BROKERS");
  }
  KafkaOptions kafka;
  kafka.brokers = flags.kafka_brokers;
  kafka.client_id = "dcm-projections-" + std::to_string(getpid());
  kafka.fetch_wait_max_ms = flags.fetch_wait_max_ms;
  if (auto error = AddKafkaProperties(flags.kafka_properties, kafka.extra)) {
    return Fail(verb, *error);
  }
  Topics topics;
  topics.prefix = flags.topic_prefix;
  const auto all_specs = ProjectionCatalog(topics);
  auto selected = SelectProjections(all_specs, flags.projections);
  if (!selected) return Fail(verb, selected.error().message);

  // The live store: a read-only snapshot; its stored offsets are the targets.
  const std::string live_path = (fs::path(flags.data_dir) / "state").string();
  std::unique_ptr<Store> live;
  if (fs::exists(live_path, ec)) {
    auto opened = Store::OpenReadOnly(live_path);
    if (!opened) return Fail(verb, "live store " + live_path + ": " + opened.error().message);
    live = std::move(*opened);
  } else {
    printf("no live store at %s: rebuilding to the end of the log, nothing to compare\n",
           live_path.c_str());
  }

  const std::string out =
      !flags.out.empty()
          ? flags.out
          : (fs::path(flags.data_dir) / fmt::format("{}-{}", verb, UtcStamp())).string();
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    return Fail(verb, "--out " + out + " exists and is not empty");
  }
  auto side = Store::Open(out, StoreOptions{.bulk_load = true, .in_memory = false});
  if (!side) return Fail(verb, "side store " + out + ": " + side.error().message);
  auto cleanup = [&] {
    side->reset();
    if (verify || flags.out.empty()) fs::remove_all(out, ec);
  };

  Metrics metrics;
  ProjectionSet set = BuildProjectionSet(side->get(), topics, &metrics);
  std::vector<RebuildSource> sources;
  for (size_t i : selected->indexes) {
    RebuildSource source = SourceOf(set, i);
    if (live) {
      auto targets = LiveTargets(*live, set.entries[i]);
      if (!targets) {
        cleanup();
        return Fail(verb, targets.error().message);
      }
      source.targets = std::move(*targets);
    }
    sources.push_back(std::move(source));
  }

  RebuildOptions options;
  options.kafka = kafka;
  options.stall_timeout_ms = flags.timeout_s * 1000;
  options.metadata_timeout_ms = std::min(10000, options.stall_timeout_ms);
  if (!flags.no_progress) options.on_progress = ProgressPrinter(isatty(STDERR_FILENO) == 1);
  Rebuilder rebuilder(options, side->get());
  auto result = rebuilder.Run(sources);
  if (!result) {
    side->reset();
    fs::remove_all(out, ec);  // a partial rebuild is of no use
    return Fail(verb, result.error().message);
  }
  for (const auto& warning : result->warnings) printf("warning: %s\n", warning.c_str());
  const auto finish_start = std::chrono::steady_clock::now();
  if (!flags.no_progress) {
    fprintf(stderr, "finishing the side store (%s)...\n",
            verify ? "flush, table file" : "flush, compaction, table file");
  }
  auto finished = verify ? (*side)->FinishBulkLoadWithoutCompaction() : (*side)->FinishBulkLoad();
  if (!finished) {
    cleanup();
    return Fail(verb, finished.error().message);
  }
  const double finish_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - finish_start).count();
  printf(
      "rebuilt %s events in %.1f s (%s events/s), store finished in %.1f s\n",
      Thousands(result->messages).c_str(), result->seconds,
      Thousands(result->seconds > 0
                    ? static_cast<int64_t>(static_cast<double>(result->messages) / result->seconds)
                    : 0)
          .c_str(),
      finish_s);

  bool mismatch = false;
  for (size_t k = 0; k < sources.size(); ++k) {
    const auto& spec = set.entries[selected->indexes[k]];
    const auto& stats = result->projections[k];
    std::string line = fmt::format("{:<10} events={:<10} poison={:<4}", spec.name,
                                   Thousands(stats.events), stats.poison);
    if (!live) {
      auto rebuilt = (*side)->Digest(spec.prefix);
      if (!rebuilt) {
        cleanup();
        return Fail(verb, rebuilt.error().message);
      }
      printf("%s rebuilt=%s\n", line.c_str(), rebuilt->c_str());
      continue;
    }
    auto compared = CompareProjection(*live, **side, spec);
    if (!compared) {
      cleanup();
      return Fail(verb, compared.error().message);
    }
    line += fmt::format(" live={} rebuilt={}", compared->live_digest, compared->rebuilt_digest);
    if (compared->match()) {
      printf("%s match\n", line.c_str());
      continue;
    }
    mismatch = true;
    if (!compared->first_difference) {
      printf("%s MISMATCH (no differing key found)\n", line.c_str());
      continue;
    }
    const auto& diff = *compared->first_difference;
    printf("%s MISMATCH first differing key \"%s\"\n    live:    %s\n    rebuilt: %s\n",
           line.c_str(), Printable(diff.key).c_str(), Value(diff.left).c_str(),
           Value(diff.right).c_str());
  }
  if (live) PrintNotCompared(*live, set.entries);
  if (verify) {
    cleanup();
  } else {
    side->reset();
    printf(
        "rebuilt store kept at %s (projections and their offsets only). To serve from it: stop "
        "dcm serve, move %s aside, move %s to %s, start dcm serve; each projection resumes from "
        "the offsets stored with it.\n",
        out.c_str(), live_path.c_str(), out.c_str(), live_path.c_str());
  }
  fflush(stdout);
  return mismatch ? 1 : 0;
}

void AddFlags(CLI::App* cmd, ProjectionsFlags& flags) {
  cmd->allow_extras();
  cmd->add_option("--data-dir", flags.data_dir,
                  "The data dir of dcm serve (live store: <dir>/state)");
  cmd->add_option("--kafka-brokers", flags.kafka_brokers, "Kafka bootstrap servers host:port,...")
      ->envname("KAFKA_BROKERS");
  cmd->add_option("--topic-prefix", flags.topic_prefix, "Prefix of every topic name")
      ->envname("DCM_TOPIC_PREFIX")
      ->capture_default_str();
  cmd->add_option("--kafka-property", flags.kafka_properties,
                  "librdkafka property key=value (repeatable)")
      ->envname("DCM_KAFKA_PROPERTIES")
      ->delimiter(',');
  cmd->add_option("--projection", flags.projections,
                  "Only this projection (repeatable): registry, health, instances, sp-status, "
                  "audit");
  cmd->add_flag("--no-progress", flags.no_progress, "No progress output on stderr");
  cmd->add_option("--fetch-wait-max-ms", flags.fetch_wait_max_ms,
                  "Consumer long-poll; 10 against the embedded mock cluster")
      ->envname("DCM_FETCH_WAIT_MAX_MS")
      ->check(CLI::Range(1, 5000))
      ->capture_default_str();
  cmd->add_option("--timeout", flags.timeout_s,
                  "Seconds without any event, while short of the targets, before giving up")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--log-level", flags.log_level, "debug, info, warn or error")
      ->capture_default_str();
}

}  // namespace

void RegisterProjectionsCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "projections", "Rebuild projections from the head of the log, or verify the live ones");
  cmd->require_subcommand(1);
  auto add_verb = [cmd, exit_code](const char* name, const char* about, const char* out_help,
                                   bool verify) {
    auto flags = std::make_shared<ProjectionsFlags>();
    CLI::App* sub = cmd->add_subcommand(name, about);
    AddFlags(sub, *flags);
    sub->add_option("--out", flags->out, out_help);
    sub->callback([flags, exit_code, sub, verify] {
      flags->extras = sub->remaining();
      *exit_code = Run(*flags, verify);
    });
  };
  add_verb("rebuild",
           "Rebuild every projection into a new store (kept) and compare with the live one",
           "Directory of the rebuilt store (default <data-dir>/rebuild-<UTC time>)", false);
  add_verb("verify", "Rebuild every projection aside and check it equals the live one (SPEC §5.4)",
           "Directory of the temporary store (default <data-dir>/verify-<UTC time>)", true);
}

}  // namespace dcm::cli
