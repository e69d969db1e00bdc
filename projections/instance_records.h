// The instance projection's stored records (projections/instance_projection.h lists the keys):
// their key prefixes, their JSON codecs and the typed reads over them, shared by the fold
// (instance_fold.cc), the views (instance_projection.cc) and the worker's own-facts overlay
// (projections/instance_decider.h). Stored bytes are a format: every field is always written, a
// reader takes absent fields as their defaults.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "projections/instance_projection.h"
#include "projections/page_token.h"
#include "projections/store.h"
#include "src/common/json_writer.h"

namespace dcm::instance_records {

inline constexpr std::string_view kCatalogItemInstanceKey = "in/c/";
inline constexpr std::string_view kResourceKey = "in/r/";
inline constexpr std::string_view kInstanceKey = "in/s/";
inline constexpr std::string_view kCleanupKey = "in/q/";
inline constexpr std::string_view kSagaKey = "in/g/";
inline constexpr std::string_view kLoadKey = "in/l/";
inline constexpr std::string_view kOutcomeKey = "in/x/";
// A live instance on a peer enclave (SPEC §10) -> its root: what the contract renewer walks.
inline constexpr std::string_view kPeerInstanceKey = "in/p/";
inline constexpr std::string_view kSpStatusKey = "ss/";

inline constexpr char kPlacedStatus[] = "PLACED";
inline constexpr char kDeletedStatus[] = "DELETED";

inline std::string Key(std::string_view prefix, std::string_view id) {
  std::string key;
  key.reserve(prefix.size() + id.size());
  key.append(prefix).append(id);
  return key;
}

std::string EncodeCatalogItemInstance(const CatalogItemInstance& c);
Result<CatalogItemInstance> DecodeCatalogItemInstance(std::string_view json);
std::string EncodeResource(const Resource& x);
Result<Resource> DecodeResource(std::string_view json);
std::string EncodeServiceTypeInstance(const ServiceTypeInstance& s);
Result<ServiceTypeInstance> DecodeServiceTypeInstance(std::string_view json);
std::string EncodeCleanupRecord(const CleanupRecord& q);
Result<CleanupRecord> DecodeCleanupRecord(std::string_view json);
// The record's fields in its API representation (SPEC §3.3, snake_case), inside an object the
// caller opened; `status` is the joined status (a cleanup record shows its own).
void WriteApiFields(JsonWriter& w, const CatalogItemInstance& c, const std::string& status);
void WriteApiFields(JsonWriter& w, const Resource& x, const std::string& status);
void WriteApiFields(JsonWriter& w, const ServiceTypeInstance& s, const std::string& status);
void WriteApiFields(JsonWriter& w, const CleanupRecord& q);
std::string EncodeSaga(const Saga& g);
Result<Saga> DecodeSaga(std::string_view json);
std::string EncodeSpStatus(const SpStatus& s);
Result<SpStatus> DecodeSpStatus(std::string_view json);
// A provider's live instance count (decimal text).
Result<int64_t> DecodeCount(std::string_view text);

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

}  // namespace dcm::instance_records
