#include "projections/instance_records.h"

#include <charconv>

#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"

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

// ---- One field table per record: the store codec and the API representation
// (src/http/instance_render.cc) both walk it, so a field is named once.

// How a field appears in the API representation.
enum class Api {
  kNone,          // not shown
  kString,        // the string
  kStringIfSet,   // the string, only when not empty
  kStringOrNull,  // the string, null when empty
  kJson,          // the JSON object text, embedded
  kJsonIfSet,     // the JSON object text, only when set (and stored only when set)
  kTime,          // RFC 3339 (ms) of the int64 milliseconds
  kTimeOrNull,    // the same, null when 0
  kInt,           // the int
  kStatus,        // the joined status the caller passes in
};

template <typename T>
struct Field {
  const char* stored;  // key in the stored record (nullptr: not stored)
  const char* api;     // key in the API representation
  Api api_kind;
  std::string T::*str = nullptr;
  int64_t T::*i64 = nullptr;
  int T::*i32 = nullptr;
  bool T::*flag = nullptr;
};

template <typename T>
std::string EncodeFields(const T& x, const std::vector<Field<T>>& fields) {
  JsonWriter w;
  w.BeginObject();
  for (const auto& f : fields) {
    if (!f.stored) continue;
    if (f.api_kind == Api::kJsonIfSet && (x.*f.str).empty()) continue;
    if (f.str) w.Field(f.stored, x.*f.str);
    if (f.i64) w.Field(f.stored, x.*f.i64);
    if (f.i32) w.Field(f.stored, x.*f.i32);
    if (f.flag) w.Field(f.stored, x.*f.flag);
  }
  w.EndObject();
  return w.Take();
}

template <typename T>
Result<T> DecodeFields(std::string_view json, const std::vector<Field<T>>& fields,
                       const char* what) {
  ASSIGN_OR_RETURN(auto o, ParseRecord(json, what));
  RecordReader r(o);
  T x;
  for (const auto& f : fields) {
    if (!f.stored) continue;
    if (f.str) r.Str(f.stored, x.*f.str);
    if (f.i64) r.I64(f.stored, x.*f.i64);
    if (f.i32) r.Int(f.stored, x.*f.i32);
    if (f.flag) r.Bool(f.stored, x.*f.flag);
  }
  RETURN_IF_ERROR(Checked(r, what));
  return x;
}

template <typename T>
void WriteApi(JsonWriter& w, const T& x, const std::vector<Field<T>>& fields,
              const std::string& status) {
  for (const auto& f : fields) {
    const std::string* text = f.str ? &(x.*f.str) : nullptr;
    const int64_t ms = f.i64 ? x.*f.i64 : 0;
    switch (f.api_kind) {
      case Api::kNone:
        break;
      case Api::kString:
        w.Field(f.api, *text);
        break;
      case Api::kStringIfSet:
        if (!text->empty()) w.Field(f.api, *text);
        break;
      case Api::kStringOrNull:
        w.Key(f.api);
        text->empty() ? w.Null() : w.String(*text);
        break;
      case Api::kJson:
        w.Key(f.api);
        w.Raw(text->empty() ? "{}" : *text);
        break;
      case Api::kJsonIfSet:
        if (!text->empty()) {
          w.Key(f.api);
          w.Raw(*text);
        }
        break;
      case Api::kTime:
        w.Field(f.api, FormatRfc3339Millis(ms));
        break;
      case Api::kTimeOrNull:
        w.Key(f.api);
        ms > 0 ? w.String(FormatRfc3339Millis(ms)) : w.Null();
        break;
      case Api::kInt:
        w.Field(f.api, x.*f.i32);
        break;
      case Api::kStatus:
        w.Field(f.api, status);
        break;
    }
  }
}

using C = CatalogItemInstance;
const std::vector<Field<C>> kCatalogItemInstanceFields = {
    {"id", "id", Api::kString, &C::id},
    {"display_name", "display_name", Api::kString, &C::display_name},
    {"spec", "spec", Api::kJson, &C::spec},
    {"resource_id", "resource_id", Api::kString, &C::resource_id},
    {"provider_name", "provider_name", Api::kString, &C::provider_name},
    {nullptr, "status", Api::kStatus},
    {"create_time_ms", "create_time", Api::kTime, nullptr, &C::create_time_ms},
    {"update_time_ms", "update_time", Api::kTime, nullptr, &C::update_time_ms},
};

using R = Resource;
// The API shows the spec before the intent; the store holds them the other way round.
const std::vector<Field<R>> kResourceFields = {
    {"id", "id", Api::kString, &R::id},
    {"root", nullptr, Api::kNone, &R::root},
    {"catalog_item_instance_id", "catalog_item_instance_id", Api::kStringIfSet,
     &R::catalog_item_instance_id},
    {"provider_name", "provider_name", Api::kString, &R::provider_name},
    {"provider_id", nullptr, Api::kNone, &R::provider_id},
    {"service_type", "service_type", Api::kString, &R::service_type},
    {nullptr, "spec", Api::kJson, &R::spec},
    {"intent", "intent", Api::kJson, &R::intent},
    {"spec", nullptr, Api::kNone, &R::spec},
    {"policy", "policy", Api::kString, &R::policy},
    {"placement", "placement", Api::kJsonIfSet, &R::placement},
    {"status", "status", Api::kStatus, &R::status},
    {"create_time_ms", "create_time", Api::kTime, nullptr, &R::create_time_ms},
    {"update_time_ms", "update_time", Api::kTime, nullptr, &R::update_time_ms},
};

using S = ServiceTypeInstance;
const std::vector<Field<S>> kServiceTypeInstanceFields = {
    {"id", "id", Api::kString, &S::id},
    {"root", nullptr, Api::kNone, &S::root},
    {"provider_name", "provider_name", Api::kString, &S::provider_name},
    {"provider_id", nullptr, Api::kNone, &S::provider_id},
    {"service_type", "service_type", Api::kString, &S::service_type},
    {"spec", "spec", Api::kJson, &S::spec},
    {"placement", "placement", Api::kJsonIfSet, &S::placement},
    {"status", "status", Api::kStatus, &S::status},
    {"deleted", nullptr, Api::kNone, nullptr, nullptr, nullptr, &S::deleted},
    {"create_time_ms", "create_time", Api::kTime, nullptr, &S::create_time_ms},
    {"update_time_ms", "update_time", Api::kTime, nullptr, &S::update_time_ms},
};

using Q = CleanupRecord;
const std::vector<Field<Q>> kCleanupRecordFields = {
    {"instance_id", "instance_id", Api::kString, &Q::instance_id},
    {"root", nullptr, Api::kNone, &Q::root},
    {"provider_name", "provider_name", Api::kString, &Q::provider_name},
    {"provider_id", nullptr, Api::kNone, &Q::provider_id},
    {"service_type", "service_type", Api::kString, &Q::service_type},
    {"requested_at_ms", "requested_at", Api::kTime, nullptr, &Q::requested_at_ms},
    {"retry_count", "retry_count", Api::kInt, nullptr, nullptr, &Q::retry_count},
    {"status", "status", Api::kStatus, &Q::status},
    {"last_attempt_ms", "last_attempt", Api::kTimeOrNull, nullptr, &Q::last_attempt_ms},
    {"last_error", "last_error", Api::kStringOrNull, &Q::last_error},
};

}  // namespace

std::string EncodeCatalogItemInstance(const CatalogItemInstance& c) {
  return EncodeFields(c, kCatalogItemInstanceFields);
}
Result<CatalogItemInstance> DecodeCatalogItemInstance(std::string_view json) {
  return DecodeFields(json, kCatalogItemInstanceFields, "catalog item instance record");
}
void WriteApiFields(JsonWriter& w, const CatalogItemInstance& c, const std::string& status) {
  WriteApi(w, c, kCatalogItemInstanceFields, status);
}

std::string EncodeResource(const Resource& x) { return EncodeFields(x, kResourceFields); }
Result<Resource> DecodeResource(std::string_view json) {
  return DecodeFields(json, kResourceFields, "resource record");
}
void WriteApiFields(JsonWriter& w, const Resource& x, const std::string& status) {
  WriteApi(w, x, kResourceFields, status);
}

std::string EncodeServiceTypeInstance(const ServiceTypeInstance& s) {
  return EncodeFields(s, kServiceTypeInstanceFields);
}
Result<ServiceTypeInstance> DecodeServiceTypeInstance(std::string_view json) {
  return DecodeFields(json, kServiceTypeInstanceFields, "service type instance record");
}
void WriteApiFields(JsonWriter& w, const ServiceTypeInstance& s, const std::string& status) {
  WriteApi(w, s, kServiceTypeInstanceFields, status);
}

std::string EncodeCleanupRecord(const CleanupRecord& q) {
  return EncodeFields(q, kCleanupRecordFields);
}
Result<CleanupRecord> DecodeCleanupRecord(std::string_view json) {
  return DecodeFields(json, kCleanupRecordFields, "cleanup record");
}
void WriteApiFields(JsonWriter& w, const CleanupRecord& q) {
  WriteApi(w, q, kCleanupRecordFields, q.status);
}

std::string EncodeSaga(const Saga& g) {
  JsonWriter w;
  w.BeginObject();
  w.Field("started", EncodeCloudEvent(EncodeInstanceEvent(g.started)));
  w.StringArray("steps", g.steps);
  w.Field("placed_resource_id", g.placed_resource_id);
  w.Field("provider_name", g.provider_name);
  w.Field("provider_id", g.provider_id);
  w.Field("spec", g.spec);
  // A peer placement's progress, only when there is one (older records have none).
  if (!g.peer.empty()) {
    w.Field("peer", g.peer);
    w.Field("flavor_id", g.flavor_id);
    w.Field("reservation_id", g.reservation_id);
    w.Field("contract_id", g.contract_id);
  }
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
    r.Str("peer", g.peer);
    r.Str("flavor_id", g.flavor_id);
    r.Str("reservation_id", g.reservation_id);
    r.Str("contract_id", g.contract_id);
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
