#include "projections/instance_projection.h"

#include <algorithm>
#include <charconv>

#include "events/json_read.h"
#include "projections/page_token.h"
#include "src/common/json_writer.h"

namespace dcm {
namespace {

constexpr std::string_view kCatalogItemInstanceKey = "in/c/";
constexpr std::string_view kResourceKey = "in/r/";
constexpr std::string_view kInstanceKey = "in/s/";
constexpr std::string_view kCleanupKey = "in/q/";
constexpr std::string_view kSagaKey = "in/g/";
constexpr std::string_view kLoadKey = "in/l/";
constexpr std::string_view kOutcomeKey = "in/x/";
constexpr std::string_view kSpStatusKey = "ss/";

constexpr char kPlacedStatus[] = "PLACED";
constexpr char kDeletedStatus[] = "DELETED";

std::string Key(std::string_view prefix, std::string_view id) {
  std::string key;
  key.reserve(prefix.size() + id.size());
  key.append(prefix).append(id);
  return key;
}

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

// Reads the record at `key` (seeing `batch`'s pending writes when given). A stored record that
// does not decode is a broken invariant or disk damage (kInternal stops the runner), never a
// poison event; views pass it on as it is.
template <typename T>
Result<std::optional<T>> Load(const Store* store, const std::string& key, const StoreBatch* batch,
                              Result<T> (*decode)(std::string_view)) {
  ASSIGN_OR_RETURN(auto stored, store->Get(key, batch));
  if (!stored) return std::optional<T>();
  auto record = decode(*stored);
  if (!record) {
    if (batch) return MakeError(ErrorCode::kInternal, record.error().message + " at " + key);
    return tl::unexpected(record.error());
  }
  return std::optional<T>(std::move(*record));
}

// One page of records under `prefix` in key order, after the page token, those `accept` takes.
template <typename T, typename Accept>
Result<Page<T>> ListPage(const Store* store, std::string_view prefix,
                         Result<T> (*decode)(std::string_view), const std::string& page_token,
                         size_t max, const Accept& accept) {
  ASSIGN_OR_RETURN(const std::string start_after, DecodePageToken(page_token));
  Page<T> page;
  std::string last_id;
  bool more = false;
  Status decode_status = OkStatus();
  RETURN_IF_ERROR(store->Scan(prefix, start_after, [&](std::string_view key, std::string_view v) {
    auto record = decode(v);
    if (!record) {
      decode_status = tl::unexpected(record.error());
      return false;
    }
    if (!accept(*record)) return true;
    if (page.items.size() == max) {
      more = true;
      return false;
    }
    page.items.push_back(std::move(*record));
    last_id.assign(key.substr(prefix.size()));
    return true;
  }));
  RETURN_IF_ERROR(decode_status);
  if (more && !page.items.empty()) page.next_page_token = EncodePageToken(last_id);
  return page;
}

// Every record under `prefix` whose key's id `accept_id` takes and whose decoded form `accept`
// takes, in key order.
template <typename T, typename AcceptId, typename Accept>
Result<std::vector<T>> ListAll(const Store* store, std::string_view prefix,
                               Result<T> (*decode)(std::string_view), const AcceptId& accept_id,
                               const Accept& accept) {
  std::vector<T> out;
  Status decode_status = OkStatus();
  RETURN_IF_ERROR(store->Scan(prefix, "", [&](std::string_view key, std::string_view v) {
    if (!accept_id(key.substr(prefix.size()))) return true;
    auto record = decode(v);
    if (!record) {
      decode_status = tl::unexpected(record.error());
      return false;
    }
    if (accept(*record)) out.push_back(std::move(*record));
    return true;
  }));
  RETURN_IF_ERROR(decode_status);
  return out;
}

// ---- The fold of one decoded event into a batch.
class Fold {
 public:
  Fold(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas, const InstanceEvent& e)
      : store_(store), batch_(batch), sagas_(sagas), e_(e) {}

  Status Run() {
    const std::string& t = e_.type;
    if (t == event_type::kOperationStarted) return Started();
    if (t == event_type::kOperationCompleted || t == event_type::kOperationFailed) {
      return Finished();
    }
    RETURN_IF_ERROR(RecordStep());
    if (t == event_type::kResourcePlaced) return ResourcePlaced();
    if (t == event_type::kResourceDeleted) return ResourceDeleted();
    if (t == event_type::kInstanceCreated) return InstanceCreated();
    if (t == event_type::kInstanceCreateFailed) return InstanceCreateFailed();
    if (t == event_type::kInstanceDeleted) return InstanceDeleted(e_.instance_id);
    if (t == event_type::kInstanceDeleteFailed) return OkStatus();
    if (t == event_type::kCleanupEnqueued) return CleanupEnqueued();
    if (t == event_type::kCleanupParked) return CleanupParked();
    if (t == event_type::kCleanupAttempted) return CleanupAttempted();
    if (t == event_type::kCleanupFailed) return CleanupFailed();
    if (t == event_type::kCleanupRetried) return CleanupRetried();
    if (t == event_type::kCatalogItemInstanceCreated) return CatalogItemInstanceCreated();
    if (t == event_type::kCatalogItemInstanceRehydrated) return CatalogItemInstanceRehydrated();
    if (t == event_type::kCatalogItemInstanceDeleted) return CatalogItemInstanceDeleted();
    return MakeError(ErrorCode::kCorruption, "not an instance fact: " + t);
  }

 private:
  // The id a fact is keyed by must be there (the codec checks required fields; this keeps a
  // codec gap from writing an "in/r/" key).
  Status Require(const std::string& value, const char* field) const {
    if (value.empty()) {
      return MakeError(ErrorCode::kCorruption, e_.type + " without " + field);
    }
    return OkStatus();
  }

  template <typename T>
  Result<std::optional<T>> Get(std::string_view prefix, std::string_view id,
                               Result<T> (*decode)(std::string_view)) const {
    return Load<T>(store_, Key(prefix, id), &batch_, decode);
  }

  // The saga in progress on `root` (nullptr: none). Change it only through PutSaga.
  Result<Saga*> SagaOf(const std::string& root) const {
    const std::string key = Key(kSagaKey, root);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (!stored) return static_cast<Saga*>(nullptr);
    auto saga = sagas_.Find(root, std::move(*stored));
    if (!saga) return MakeError(ErrorCode::kInternal, saga.error().message + " at " + key);
    return *saga;
  }

  void PutSaga(Saga saga) {
    std::string json = EncodeSaga(saga);
    batch_.Put(Key(kSagaKey, e_.root), json);
    sagas_.Written(e_.root, std::move(json), std::move(saga));
  }

  Status Started() {
    RETURN_IF_ERROR(Require(e_.root, "root"));
    RETURN_IF_ERROR(Require(e_.request_id, "request_id"));
    // A duplicate after the operation ended must not bring its saga back.
    ASSIGN_OR_RETURN(auto outcome, store_->Get(Key(kOutcomeKey, e_.request_id), &batch_));
    if (outcome) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
    if (saga && saga->started.request_id == e_.request_id) return OkStatus();
    Saga started;
    started.started = e_;
    PutSaga(std::move(started));
    return OkStatus();
  }

  Status Finished() {
    RETURN_IF_ERROR(Require(e_.request_id, "request_id"));
    if (!e_.root.empty()) {
      ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
      if (saga && saga->started.request_id == e_.request_id) {
        batch_.Delete(Key(kSagaKey, e_.root));
        sagas_.Forget(e_.root);
      }
    }
    batch_.Put(Key(kOutcomeKey, e_.request_id), e_.type);
    return OkStatus();
  }

  // A fact of the saga in progress on its root: remember it as a step.
  Status RecordStep() {
    if (e_.request_id.empty() || e_.root.empty()) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
    if (!saga || saga->started.request_id != e_.request_id) return OkStatus();
    Saga updated = *saga;
    if (!updated.Has(e_.type)) updated.steps.push_back(e_.type);
    if (e_.type == event_type::kResourcePlaced) {
      updated.placed_resource_id = e_.resource_id;
      updated.provider_name = e_.provider_name;
      updated.provider_id = e_.provider_id;
      updated.spec = e_.spec;
    }
    if (updated != *saga) PutSaga(std::move(updated));
    return OkStatus();
  }

  Status ResourcePlaced() {
    RETURN_IF_ERROR(Require(e_.resource_id, "resource_id"));
    const std::string key = Key(kResourceKey, e_.resource_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    Resource r;
    r.id = e_.resource_id;
    r.root = e_.root;
    r.catalog_item_instance_id = e_.catalog_item_instance_id;
    r.provider_name = e_.provider_name;
    r.provider_id = e_.provider_id;
    r.service_type = e_.service_type;
    if (!e_.intent.empty()) r.intent = e_.intent;
    if (!e_.spec.empty()) r.spec = e_.spec;
    r.policy = e_.policy;
    r.status = kPlacedStatus;
    r.create_time_ms = e_.time_ms;
    r.update_time_ms = e_.time_ms;
    batch_.Put(key, EncodeResource(r));
    return OkStatus();
  }

  Status ResourceDeleted() {
    RETURN_IF_ERROR(Require(e_.resource_id, "resource_id"));
    batch_.Delete(Key(kResourceKey, e_.resource_id));
    return OkStatus();
  }

  Status InstanceCreated() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    const std::string key = Key(kInstanceKey, e_.instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (!stored) {
      ServiceTypeInstance s;
      s.id = e_.instance_id;
      s.root = e_.root;
      s.provider_name = e_.provider_name;
      s.provider_id = e_.provider_id;
      s.service_type = e_.service_type;
      if (!e_.spec.empty()) s.spec = e_.spec;
      s.status = e_.status;
      s.create_time_ms = e_.time_ms;
      s.update_time_ms = e_.time_ms;
      batch_.Put(key, EncodeServiceTypeInstance(s));
      RETURN_IF_ERROR(AddLoad(s.provider_id, +1));
    }
    ASSIGN_OR_RETURN(auto resource, Get<Resource>(kResourceKey, e_.instance_id, &DecodeResource));
    if (resource && (resource->status != e_.status || resource->update_time_ms != e_.time_ms)) {
      resource->status = e_.status;
      resource->update_time_ms = e_.time_ms;
      batch_.Put(Key(kResourceKey, e_.instance_id), EncodeResource(*resource));
    }
    return OkStatus();
  }

  Status InstanceCreateFailed() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    batch_.Delete(Key(kResourceKey, e_.instance_id));
    return OkStatus();
  }

  // The SP confirmed `id` is gone: the instance is kept as deleted (its live flag flips once,
  // so the provider's load drops once), and its cleanup and placement records go.
  Status InstanceDeleted(const std::string& id) {
    RETURN_IF_ERROR(Require(id, "instance_id"));
    ASSIGN_OR_RETURN(auto s,
                     Get<ServiceTypeInstance>(kInstanceKey, id, &DecodeServiceTypeInstance));
    if (s && !s->deleted) {
      s->deleted = true;
      s->status = kDeletedStatus;
      s->update_time_ms = e_.time_ms;
      batch_.Put(Key(kInstanceKey, id), EncodeServiceTypeInstance(*s));
      RETURN_IF_ERROR(AddLoad(s->provider_id, -1));
    }
    batch_.Delete(Key(kCleanupKey, id));
    batch_.Delete(Key(kResourceKey, id));
    return OkStatus();
  }

  Status AddLoad(const std::string& provider_id, int64_t delta) {
    if (provider_id.empty()) return OkStatus();
    const std::string key = Key(kLoadKey, provider_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    int64_t n = 0;
    if (stored) {
      auto count = DecodeCount(*stored);
      if (!count) return MakeError(ErrorCode::kInternal, count.error().message + " at " + key);
      n = *count;
    }
    n = std::max<int64_t>(0, n + delta);
    if (n == 0) {
      batch_.Delete(key);
    } else {
      batch_.Put(key, std::to_string(n));
    }
    return OkStatus();
  }

  Result<std::optional<CleanupRecord>> CleanupOf(const std::string& id) const {
    return Get<CleanupRecord>(kCleanupKey, id, &DecodeCleanupRecord);
  }

  void Put(const CleanupRecord& q) {
    batch_.Put(Key(kCleanupKey, q.instance_id), EncodeCleanupRecord(q));
  }

  Status CleanupEnqueued() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto stored, store_->Get(Key(kCleanupKey, e_.instance_id), &batch_));
    if (stored) return OkStatus();
    CleanupRecord q;
    q.instance_id = e_.instance_id;
    q.root = e_.root;
    q.provider_name = e_.provider_name;
    q.provider_id = e_.provider_id;
    q.service_type = e_.service_type;
    q.requested_at_ms = e_.requested_at_ms != 0 ? e_.requested_at_ms : e_.time_ms;
    q.retry_count = 0;
    q.status = kCleanupPending;
    Put(q);
    return OkStatus();
  }

  Status CleanupParked() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = e_.status.empty() ? kCleanupPendingProvider : e_.status;
    Put(*q);
    return OkStatus();
  }

  Status CleanupAttempted() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    if (e_.outcome == "deleted" || e_.outcome == "gone") return InstanceDeleted(e_.instance_id);
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->retry_count = e_.retry_count;
    if (!e_.status.empty()) q->status = e_.status;
    q->last_attempt_ms = e_.time_ms;
    q->last_error = e_.error;
    Put(*q);
    return OkStatus();
  }

  Status CleanupFailed() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = kCleanupFailedStatus;
    q->retry_count = e_.retry_count;
    if (!e_.error.empty()) q->last_error = e_.error;
    Put(*q);
    return OkStatus();
  }

  Status CleanupRetried() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = kCleanupPending;
    q->retry_count = 0;
    Put(*q);
    return OkStatus();
  }

  Status CatalogItemInstanceCreated() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    const std::string key = Key(kCatalogItemInstanceKey, e_.catalog_item_instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    CatalogItemInstance c;
    c.id = e_.catalog_item_instance_id;
    c.display_name = e_.display_name;
    if (!e_.spec.empty()) c.spec = e_.spec;
    c.resource_id = e_.resource_id;
    c.provider_name = e_.provider_name;
    c.create_time_ms = e_.time_ms;
    c.update_time_ms = e_.time_ms;
    batch_.Put(key, EncodeCatalogItemInstance(c));
    return OkStatus();
  }

  Status CatalogItemInstanceRehydrated() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    ASSIGN_OR_RETURN(auto c,
                     Get<CatalogItemInstance>(kCatalogItemInstanceKey, e_.catalog_item_instance_id,
                                              &DecodeCatalogItemInstance));
    if (!c) return OkStatus();
    c->resource_id = e_.new_resource_id.empty() ? e_.resource_id : e_.new_resource_id;
    c->provider_name = e_.provider_name;
    c->update_time_ms = e_.time_ms;
    batch_.Put(Key(kCatalogItemInstanceKey, c->id), EncodeCatalogItemInstance(*c));
    return OkStatus();
  }

  Status CatalogItemInstanceDeleted() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    batch_.Delete(Key(kCatalogItemInstanceKey, e_.catalog_item_instance_id));
    return OkStatus();
  }

  const Store* store_;
  StoreBatch& batch_;
  DecodedCache<Saga>& sagas_;
  const InstanceEvent& e_;
};

bool IsTerminal(std::string_view type) {
  return type == event_type::kOperationCompleted || type == event_type::kOperationFailed;
}

}  // namespace

bool Saga::Has(std::string_view type) const {
  return std::find(steps.begin(), steps.end(), type) != steps.end();
}

InstanceProjection::InstanceProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics)
    : store_(store), waiters_(waiters), applied_(metrics, kName), sagas_(&DecodeSaga, 10000) {}

Status InstanceProjection::Apply(const CloudEvent& event, const EventPosition&, StoreBatch& batch) {
  if (event.type == event_type::kOperationRequested) {
    // Not a fact (it belongs on dcm.instance-requests): nothing to fold. A placeholder keeps
    // batch_events_ aligned with the runner's applied events.
    InstanceEvent ignored;
    ignored.type = event.type;
    batch_events_.push_back(std::move(ignored));
    return OkStatus();
  }
  auto decoded = DecodeInstanceEvent(event);
  if (!decoded) return MakeError(ErrorCode::kCorruption, decoded.error().message);
  RETURN_IF_ERROR(Fold(store_, batch, sagas_, *decoded).Run());
  applied_.Inc(decoded->type);
  batch_events_.push_back(std::move(*decoded));
  return OkStatus();
}

void InstanceProjection::AfterCommit(const std::vector<CloudEvent>& applied) {
  // Apply pushed one entry per applied event; a batch that failed part-way (the runner stops)
  // may have left a head behind, so this batch's entries are the tail.
  if (batch_events_.size() >= applied.size()) {
    batch_events_.erase(batch_events_.begin(),
                        batch_events_.end() - static_cast<ptrdiff_t>(applied.size()));
    // The listener first: the worker frees the roots whose operation ended before a caller,
    // answered below, can send its next request on them.
    if (listener_) {
      std::vector<InstanceEvent> facts;
      for (const auto& e : batch_events_) {
        if (e.type != event_type::kOperationRequested) facts.push_back(e);
      }
      if (!facts.empty()) listener_(facts);
    }
    for (size_t i = 0; waiters_ && i < applied.size(); ++i) {
      if (IsTerminal(applied[i].type) && batch_events_[i].type == applied[i].type) {
        waiters_->Complete(batch_events_[i].request_id, applied[i]);
      }
    }
  }
  batch_events_.clear();
}

SpStatusProjection::SpStatusProjection(Store* store, Metrics* metrics)
    : store_(store), applied_(metrics, kName) {}

Status SpStatusProjection::Apply(const CloudEvent& event, const EventPosition&, StoreBatch& batch) {
  auto decoded = DecodeSpStatusEvent(event);
  if (!decoded) return MakeError(ErrorCode::kCorruption, decoded.error().message);
  if (decoded->instance_id.empty()) {
    return MakeError(ErrorCode::kCorruption, "status event without an instance id");
  }
  const std::string key = Key(kSpStatusKey, decoded->instance_id);
  ASSIGN_OR_RETURN(auto stored, Load<SpStatus>(store_, key, &batch, &DecodeSpStatus));
  if (stored && stored->time_ms > decoded->time_ms) return OkStatus();  // older than we have
  SpStatus status{decoded->status, decoded->message, decoded->time_ms};
  if (stored && *stored == status) return OkStatus();
  batch.Put(key, EncodeSpStatus(status));
  applied_.Inc(event.type);
  return OkStatus();
}

// ---- InstanceView.

namespace {
constexpr auto kAll = [](const auto&) { return true; };
}  // namespace

Result<std::optional<CatalogItemInstance>> InstanceView::GetCatalogItemInstance(
    const std::string& id) const {
  return Load<CatalogItemInstance>(store_, Key(kCatalogItemInstanceKey, id), nullptr,
                                   &DecodeCatalogItemInstance);
}

Result<Page<CatalogItemInstance>> InstanceView::ListCatalogItemInstances(
    const std::string& page_token, size_t max) const {
  return ListPage<CatalogItemInstance>(store_, kCatalogItemInstanceKey, &DecodeCatalogItemInstance,
                                       page_token, max, kAll);
}

Result<std::optional<Resource>> InstanceView::GetResource(const std::string& id) const {
  return Load<Resource>(store_, Key(kResourceKey, id), nullptr, &DecodeResource);
}

Result<Page<Resource>> InstanceView::ListResources(const std::string& page_token,
                                                   size_t max) const {
  return ListPage<Resource>(store_, kResourceKey, &DecodeResource, page_token, max, kAll);
}

Result<std::optional<ServiceTypeInstance>> InstanceView::GetInstance(const std::string& id) const {
  return Load<ServiceTypeInstance>(store_, Key(kInstanceKey, id), nullptr,
                                   &DecodeServiceTypeInstance);
}

Result<Page<ServiceTypeInstance>> InstanceView::ListInstances(const InstanceFilter& filter,
                                                              const std::string& page_token,
                                                              size_t max) const {
  return ListPage<ServiceTypeInstance>(
      store_, kInstanceKey, &DecodeServiceTypeInstance, page_token, max,
      [&](const ServiceTypeInstance& s) {
        return (filter.show_deleted || !s.deleted) &&
               (filter.provider.empty() || s.provider_name == filter.provider) &&
               (filter.service_type.empty() || s.service_type == filter.service_type);
      });
}

Result<std::optional<CleanupRecord>> InstanceView::GetCleanup(
    const std::string& instance_id) const {
  return Load<CleanupRecord>(store_, Key(kCleanupKey, instance_id), nullptr, &DecodeCleanupRecord);
}

Result<Page<CleanupRecord>> InstanceView::ListCleanup(const std::string& status,
                                                      const std::string& page_token,
                                                      size_t max) const {
  return ListPage<CleanupRecord>(
      store_, kCleanupKey, &DecodeCleanupRecord, page_token, max,
      [&](const CleanupRecord& q) { return status.empty() || q.status == status; });
}

Result<std::optional<Saga>> InstanceView::GetSaga(const std::string& root) const {
  return Load<Saga>(store_, Key(kSagaKey, root), nullptr, &DecodeSaga);
}

Result<std::vector<Saga>> InstanceView::ListSagas(
    const std::function<bool(const std::string& root)>& accept) const {
  std::string root;
  return ListAll<Saga>(
      store_, kSagaKey, &DecodeSaga, [&](std::string_view id) { return accept(root.assign(id)); },
      kAll);
}

Result<std::vector<CleanupRecord>> InstanceView::ListCleanupFor(
    const std::function<bool(const std::string& root)>& accept) const {
  return ListAll<CleanupRecord>(
      store_, kCleanupKey, &DecodeCleanupRecord, [](std::string_view) { return true; },
      [&](const CleanupRecord& q) { return accept(q.root); });
}

Result<int64_t> InstanceView::LiveInstances(const std::string& provider_id) const {
  ASSIGN_OR_RETURN(auto stored, store_->Get(Key(kLoadKey, provider_id)));
  if (!stored) return int64_t{0};
  return DecodeCount(*stored);
}

Result<std::optional<SpStatus>> InstanceView::GetSpStatus(const std::string& instance_id) const {
  return Load<SpStatus>(store_, Key(kSpStatusKey, instance_id), nullptr, &DecodeSpStatus);
}

Result<std::optional<std::string>> InstanceView::RequestOutcome(
    const std::string& request_id) const {
  return store_->Get(Key(kOutcomeKey, request_id));
}

}  // namespace dcm
