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
#include "src/common/time_format.h"

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
  // SPEC §7: probe entries younger than this are compared; older ones may be gone from Kafka.
  std::string health_events_retention = "168h";
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

namespace fs = std::filesystem;

// One `dcm projections rebuild|verify`: check the flags, open the live store (read-only) and a
// side store, rebuild into the side store, compare, and keep or delete the side store. Errors
// print and exit 2 (Fail); a side store is never left behind by a failed run unless --out named
// it for a rebuild.
class ProjectionsRun {
 public:
  ProjectionsRun(const ProjectionsFlags& flags, bool verify)
      : flags_(flags), verify_(verify), verb_(verify ? "verify" : "rebuild") {}

  int Run() {
    InitLogging(flags_.log_level);
    if (auto error = CheckFlags()) return Fail(verb_, *error);
    auto retention = ParseHealthEventsRetention(flags_.health_events_retention);
    if (!retention) return Fail(verb_, retention.error().message);
    retention_ = *retention;
    KafkaOptions kafka;
    if (auto error = KafkaFor(kafka)) return Fail(verb_, *error);
    topics_.prefix = flags_.topic_prefix;
    auto selected = SelectProjections(ProjectionCatalog(topics_), flags_.projections);
    if (!selected) return Fail(verb_, selected.error().message);
    if (auto opened = OpenStores(); !opened) return Fail(verb_, opened.error().message);
    set_ = BuildProjectionSet(side_.get(), topics_, &metrics_);
    selected_ = selected->indexes;
    auto sources = Sources();
    if (!sources) return CleanUpAndFail(sources.error().message);
    auto result = Rebuild(kafka, *sources);
    if (!result) {
      side_.reset();
      fs::remove_all(out_, ec_);  // a partial rebuild is of no use
      return Fail(verb_, result.error().message);
    }
    if (auto finished = Finish(*result); !finished) {
      return CleanUpAndFail(finished.error().message);
    }
    cutoff_ms_ = CompareCutoff();
    auto mismatch = Compare(*result);
    if (!mismatch) return CleanUpAndFail(mismatch.error().message);
    End();
    return *mismatch ? 1 : 0;
  }

 private:
  std::optional<std::string> CheckFlags() {
    if (!flags_.extras.empty()) return "unexpected argument '" + flags_.extras[0] + "'";
    if (flags_.data_dir.empty()) return "--data-dir is required";
    if (!fs::is_directory(flags_.data_dir, ec_)) return "no data dir " + flags_.data_dir;
    if (flags_.kafka_brokers.empty()) return "no Kafka: give --kafka-brokers or set KAFKA_BROKERS";
    return std::nullopt;
  }

  std::optional<std::string> KafkaFor(KafkaOptions& kafka) const {
    kafka.brokers = flags_.kafka_brokers;
    kafka.client_id = "dcm-projections-" + std::to_string(getpid());
    kafka.fetch_wait_max_ms = flags_.fetch_wait_max_ms;
    return AddKafkaProperties(flags_.kafka_properties, kafka.extra);
  }

  // The live store: a read-only snapshot; its stored offsets are the targets. Then the side
  // store the rebuild writes, in bulk mode.
  Status OpenStores() {
    live_path_ = (fs::path(flags_.data_dir) / "state").string();
    if (fs::exists(live_path_, ec_)) {
      auto opened = Store::OpenReadOnly(live_path_);
      if (!opened) {
        return MakeError(opened.error().code,
                         "live store " + live_path_ + ": " + opened.error().message);
      }
      live_ = std::move(*opened);
    } else {
      printf("no live store at %s: rebuilding to the end of the log, nothing to compare\n",
             live_path_.c_str());
    }
    out_ = !flags_.out.empty()
               ? flags_.out
               : (fs::path(flags_.data_dir) / fmt::format("{}-{}", verb_, UtcStamp())).string();
    if (fs::exists(out_, ec_) && !fs::is_empty(out_, ec_)) {
      return MakeError(ErrorCode::kInvalidArgument, "--out " + out_ + " exists and is not empty");
    }
    auto side = Store::Open(out_, StoreOptions{.bulk_load = true, .in_memory = false});
    if (!side) {
      return MakeError(side.error().code, "side store " + out_ + ": " + side.error().message);
    }
    side_ = std::move(*side);
    return OkStatus();
  }

  // The selected projections, each up to the live store's offsets when there is one.
  Result<std::vector<RebuildSource>> Sources() const {
    std::vector<RebuildSource> sources;
    for (size_t i : selected_) {
      RebuildSource source = SourceOf(set_, i);
      if (live_) {
        ASSIGN_OR_RETURN(source.targets, LiveTargets(*live_, set_.entries[i]));
      }
      sources.push_back(std::move(source));
    }
    return sources;
  }

  Result<RebuildResult> Rebuild(const KafkaOptions& kafka,
                                const std::vector<RebuildSource>& sources) const {
    RebuildOptions options;
    options.kafka = kafka;
    options.stall_timeout_ms = flags_.timeout_s * 1000;
    options.windowed_topics = {topics_.HealthProbes()};
    options.metadata_timeout_ms = std::min(10000, options.stall_timeout_ms);
    if (!flags_.no_progress) options.on_progress = ProgressPrinter(isatty(STDERR_FILENO) == 1);
    return Rebuilder(options, side_.get()).Run(sources);
  }

  // Finishes the side store (verify skips the compaction it deletes anyway) and prints the
  // totals.
  Status Finish(const RebuildResult& result) {
    for (const auto& warning : result.warnings) printf("warning: %s\n", warning.c_str());
    const auto finish_start = std::chrono::steady_clock::now();
    if (!flags_.no_progress) {
      fprintf(stderr, "finishing the side store (%s)...\n",
              verify_ ? "flush, table file" : "flush, compaction, table file");
    }
    RETURN_IF_ERROR(verify_ ? side_->FinishBulkLoadWithoutCompaction() : side_->FinishBulkLoad());
    const double finish_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - finish_start).count();
    const auto per_s =
        result.seconds > 0
            ? static_cast<int64_t>(static_cast<double>(result.messages) / result.seconds)
            : 0;
    printf("rebuilt %s events in %.1f s (%s events/s), store finished in %.1f s\n",
           Thousands(result.messages).c_str(), result.seconds, Thousands(per_s).c_str(), finish_s);
    return OkStatus();
  }

  // Probe events have a retention (SPEC §7): Kafka keeps those younger than the retention, the
  // live audit index sweeps older ones, and a health record follows its latest probe. So entries
  // that depend on probes older than now - retention + margin are compared on neither side. The
  // margin (a tenth of the retention, at most 5 min) covers clocks that disagree between hosts
  // and the broker's segment-wise deletion; "now" is taken after the rebuild, so nothing Kafka
  // dropped while it ran is compared.
  int64_t CompareCutoff() const {
    const auto margin =
        std::min<std::chrono::milliseconds>(retention_ / 10, std::chrono::minutes(5));
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t cutoff = now_ms - retention_.count() + margin.count();
    if (live_) {
      printf("probe retention %s: probe entries and health records older than %s not compared\n",
             flags_.health_events_retention.c_str(), FormatRfc3339Millis(cutoff).c_str());
    }
    return cutoff;
  }

  // One line per projection: its rebuilt digest, or live against rebuilt. True: a mismatch.
  Result<bool> Compare(const RebuildResult& result) const {
    bool mismatch = false;
    for (size_t k = 0; k < selected_.size(); ++k) {
      const auto& entry = set_.entries[selected_[k]];
      const auto& stats = result.projections[k];
      std::string line = fmt::format("{:<10} events={:<10} poison={:<4}", entry.name,
                                     Thousands(stats.events), stats.poison);
      if (!live_) {
        ASSIGN_OR_RETURN(const auto rebuilt, side_->Digest(entry.prefix));
        printf("%s rebuilt=%s\n", line.c_str(), rebuilt.c_str());
        continue;
      }
      ASSIGN_OR_RETURN(const auto compared, CompareProjection(*live_, *side_, entry, cutoff_ms_));
      PrintComparison(line, compared);
      mismatch = mismatch || !compared.match();
    }
    return mismatch;
  }

  static void PrintComparison(std::string line, const ProjectionComparison& compared) {
    line += fmt::format(" live={} rebuilt={}", compared.live_digest, compared.rebuilt_digest);
    if (compared.match()) {
      printf("%s match\n", line.c_str());
    } else if (!compared.first_difference) {
      printf("%s MISMATCH (no differing key found)\n", line.c_str());
    } else {
      const auto& diff = *compared.first_difference;
      printf("%s MISMATCH first differing key \"%s\"\n    live:    %s\n    rebuilt: %s\n",
             line.c_str(), Printable(diff.key).c_str(), Value(diff.left).c_str(),
             Value(diff.right).c_str());
    }
  }

  // verify deletes the side store; rebuild keeps it and says how to serve from it.
  void End() {
    if (live_) PrintNotCompared(*live_, set_.entries);
    if (verify_) {
      CleanUp();
    } else {
      side_.reset();
      printf(
          "rebuilt store kept at %s (projections and their offsets only). To serve from it: stop "
          "dcm serve, move %s aside, move %s to %s, start dcm serve; each projection resumes "
          "from the offsets stored with it.\n",
          out_.c_str(), live_path_.c_str(), out_.c_str(), live_path_.c_str());
    }
    fflush(stdout);
  }

  void CleanUp() {
    side_.reset();
    if (verify_ || flags_.out.empty()) fs::remove_all(out_, ec_);
  }

  int CleanUpAndFail(const std::string& message) {
    CleanUp();
    return Fail(verb_, message);
  }

  const ProjectionsFlags& flags_;
  const bool verify_;
  const char* const verb_;
  std::error_code ec_;
  Topics topics_;
  std::string live_path_;
  std::string out_;
  std::unique_ptr<Store> live_;
  std::unique_ptr<Store> side_;
  Metrics metrics_;
  ProjectionSet set_;  // built on side_; declared after it, so destroyed before it
  std::vector<size_t> selected_;
  std::chrono::milliseconds retention_{0};
  int64_t cutoff_ms_ = 0;
};

int Run(const ProjectionsFlags& flags, bool verify) { return ProjectionsRun(flags, verify).Run(); }

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
  cmd->add_option("--health-events-retention", flags.health_events_retention,
                  "dcm serve's probe retention: older probe entries are not compared")
      ->envname("HEALTH_EVENTS_RETENTION")
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
