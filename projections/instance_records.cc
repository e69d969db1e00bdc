#include "projections/instance_records.h"

#include <charconv>

#include "events/json_read.h"
#include "src/common/json_writer.h"

namespace dcm::instance_records {
namespace {

// ---- Record codecs. Every field is always written (one byte sequence per state); a reader
// takes absent fields as their defaults and rejects fields of the wrong JSON type.

class RecordReader {
 public:
  explicit RecordReader(simdjson::dom::object o) : o_(o) {}
  void Str(std::string_view key, std::string& out) {
    auto v = Member(o_, key);
    std::string_view text;
    if (!v) return;
    if (v->get(text)) {
      ok_ = false;
    } else {
      out.assign(text);
    }
  }
  void I64(std::string_view key, int64_t& out) {
    auto v = Member(o_, key);
    if (v && v->get(out)) ok_ = false;
  }
  void Int(std::string_view key, int& out) {
    int64_t v = out;
    I64(key, v);
    if (v < INT32_MIN || v > INT32_MAX) ok_ = false;
    out = static_cast<int>(v);
  }
  void Bool(std::string_view key, bool& out) {
    auto v = Member(o_, key);
    if (v && v->get(out)) ok_ = false;
  }
  void Strings(std::string_view key, std::vector<std::string>& out) {
    auto v = Member(o_, key);
    if (!v) return;
    simdjson::dom::array items;
    if (v->get(items)) {
      ok_ = false;
      return;
    }
    for (auto item : items) {
      std::string_view text;
      if (item.get(text)) {
        ok_ = false;
      } else {
        out.emplace_back(text);
      }
    }
  }
  bool ok() const { return ok_; }

 private:
  simdjson::dom::object o_;
  bool ok_ = true;
};

Result<simdjson::dom::object> ParseRecord(std::string_view json, const char* what) {
  auto parsed = ParseJson(json);
  simdjson::dom::object o;
  if (!parsed || parsed->get(o)) {
    return MakeError(ErrorCode::kCorruption, std::string("unreadable ") + what);
  }
  return o;
}

Status Checked(const RecordReader& r, const char* what) {
  if (!r.ok()) return MakeError(ErrorCode::kCorruption, std::string("unreadable ") + what);
  return OkStatus();
}

}  // namespace

std::string EncodeCatalogItemInstance(const CatalogItemInstance& c) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", c.id);
  w.Field("display_name", c.display_name);
  w.Field("spec", c.spec);
  w.Field("resource_id", c.resource_id);
  w.Field("provider_name", c.provider_name);
  w.Field("create_time_ms", c.create_time_ms);
  w.Field("update_time_ms", c.update_time_ms);
  w.EndObject();
  return w.Take();
}

Result<CatalogItemInstance> DecodeCatalogItemInstance(std::string_view json) {
  constexpr char kWhat[] = "catalog item instance record";
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
  RecordReader r(o);
  CatalogItemInstance c;
  r.Str("id", c.id);
  r.Str("display_name", c.display_name);
  r.Str("spec", c.spec);
  r.Str("resource_id", c.resource_id);
  r.Str("provider_name", c.provider_name);
  r.I64("create_time_ms", c.create_time_ms);
  r.I64("update_time_ms", c.update_time_ms);
  RETURN_IF_ERROR(Checked(r, kWhat));
  return c;
}

std::string EncodeResource(const Resource& x) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", x.id);
  w.Field("root", x.root);
  w.Field("catalog_item_instance_id", x.catalog_item_instance_id);
  w.Field("provider_name", x.provider_name);
  w.Field("provider_id", x.provider_id);
  w.Field("service_type", x.service_type);
  w.Field("intent", x.intent);
  w.Field("spec", x.spec);
  w.Field("policy", x.policy);
  w.Field("status", x.status);
  w.Field("create_time_ms", x.create_time_ms);
  w.Field("update_time_ms", x.update_time_ms);
  w.EndObject();
  return w.Take();
}

Result<Resource> DecodeResource(std::string_view json) {
  constexpr char kWhat[] = "resource record";
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
  RecordReader r(o);
  Resource x;
  r.Str("id", x.id);
  r.Str("root", x.root);
  r.Str("catalog_item_instance_id", x.catalog_item_instance_id);
  r.Str("provider_name", x.provider_name);
  r.Str("provider_id", x.provider_id);
  r.Str("service_type", x.service_type);
  r.Str("intent", x.intent);
  r.Str("spec", x.spec);
  r.Str("policy", x.policy);
  r.Str("status", x.status);
  r.I64("create_time_ms", x.create_time_ms);
  r.I64("update_time_ms", x.update_time_ms);
  RETURN_IF_ERROR(Checked(r, kWhat));
  return x;
}

std::string EncodeServiceTypeInstance(const ServiceTypeInstance& s) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", s.id);
  w.Field("root", s.root);
  w.Field("provider_name", s.provider_name);
  w.Field("provider_id", s.provider_id);
  w.Field("service_type", s.service_type);
  w.Field("spec", s.spec);
  w.Field("status", s.status);
  w.Field("deleted", s.deleted);
  w.Field("create_time_ms", s.create_time_ms);
  w.Field("update_time_ms", s.update_time_ms);
  w.EndObject();
  return w.Take();
}

Result<ServiceTypeInstance> DecodeServiceTypeInstance(std::string_view json) {
  constexpr char kWhat[] = "service type instance record";
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
  RecordReader r(o);
  ServiceTypeInstance s;
  r.Str("id", s.id);
  r.Str("root", s.root);
  r.Str("provider_name", s.provider_name);
  r.Str("provider_id", s.provider_id);
  r.Str("service_type", s.service_type);
  r.Str("spec", s.spec);
  r.Str("status", s.status);
  r.Bool("deleted", s.deleted);
  r.I64("create_time_ms", s.create_time_ms);
  r.I64("update_time_ms", s.update_time_ms);
  RETURN_IF_ERROR(Checked(r, kWhat));
  return s;
}

std::string EncodeCleanupRecord(const CleanupRecord& q) {
  JsonWriter w;
  w.BeginObject();
  w.Field("instance_id", q.instance_id);
  w.Field("root", q.root);
  w.Field("provider_name", q.provider_name);
  w.Field("provider_id", q.provider_id);
  w.Field("service_type", q.service_type);
  w.Field("requested_at_ms", q.requested_at_ms);
  w.Field("retry_count", q.retry_count);
  w.Field("status", q.status);
  w.Field("last_attempt_ms", q.last_attempt_ms);
  w.Field("last_error", q.last_error);
  w.EndObject();
  return w.Take();
}

Result<CleanupRecord> DecodeCleanupRecord(std::string_view json) {
  constexpr char kWhat[] = "cleanup record";
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
  RecordReader r(o);
  CleanupRecord q;
  r.Str("instance_id", q.instance_id);
  r.Str("root", q.root);
  r.Str("provider_name", q.provider_name);
  r.Str("provider_id", q.provider_id);
  r.Str("service_type", q.service_type);
  r.I64("requested_at_ms", q.requested_at_ms);
  r.Int("retry_count", q.retry_count);
  r.Str("status", q.status);
  r.I64("last_attempt_ms", q.last_attempt_ms);
  r.Str("last_error", q.last_error);
  RETURN_IF_ERROR(Checked(r, kWhat));
  return q;
}

// `started` is the operation_started event as CloudEvents JSON (a string member), so a saga
// carries every parameter of its operation in the form the worker produced it.
std::string EncodeSaga(const Saga& g) {
  JsonWriter w;
  w.BeginObject();
  w.Field("started", EncodeCloudEvent(EncodeInstanceEvent(g.started)));
  w.StringArray("steps", g.steps);
  w.Field("placed_resource_id", g.placed_resource_id);
  w.Field("provider_name", g.provider_name);
  w.Field("provider_id", g.provider_id);
  w.Field("spec", g.spec);
  w.EndObject();
  return w.Take();
}

Result<Saga> DecodeSaga(std::string_view json) {
  constexpr char kWhat[] = "saga record";
  Saga g;
  std::string started;
  {
    ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
    RecordReader r(o);
    r.Str("started", started);
    r.Strings("steps", g.steps);
    r.Str("placed_resource_id", g.placed_resource_id);
    r.Str("provider_name", g.provider_name);
    r.Str("provider_id", g.provider_id);
    r.Str("spec", g.spec);
    RETURN_IF_ERROR(Checked(r, kWhat));
  }
  // Parsing `started` reuses the thread's parser: everything above is copied out already.
  auto event = DecodeCloudEvent(started);
  if (!event) return MakeError(ErrorCode::kCorruption, "saga record: " + event.error().message);
  auto decoded = DecodeInstanceEvent(*event);
  if (!decoded) return MakeError(ErrorCode::kCorruption, "saga record: " + decoded.error().message);
  g.started = std::move(*decoded);
  return g;
}

std::string EncodeSpStatus(const SpStatus& s) {
  JsonWriter w;
  w.BeginObject();
  w.Field("status", s.status);
  w.Field("message", s.message);
  w.Field("time_ms", s.time_ms);
  w.EndObject();
  return w.Take();
}

Result<SpStatus> DecodeSpStatus(std::string_view json) {
  constexpr char kWhat[] = "sp status record";
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, kWhat));
  RecordReader r(o);
  SpStatus s;
  r.Str("status", s.status);
  r.Str("message", s.message);
  r.I64("time_ms", s.time_ms);
  RETURN_IF_ERROR(Checked(r, kWhat));
  return s;
}

Result<int64_t> DecodeCount(std::string_view text) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0) {
    return MakeError(ErrorCode::kCorruption, "unreadable live instance count");
  }
  return n;
}

}  // namespace dcm::instance_records
