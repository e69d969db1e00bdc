#include "projections/registry_projection.h"

#include <charconv>

#include "projections/page_token.h"
#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr std::string_view kProviderKey = "reg/p/";
constexpr std::string_view kRequestKey = "reg/r/";
// A value under reg/p/<id> is a 17-byte header, then the body:
//   'P' <seq as 16 hex digits> <provider JSON>     a live provider
//   'T' <seq as 16 hex digits>                     deleted or moved away at <seq>
// One key per id keeps the fold at one read and one write per event.
constexpr size_t kHeaderSize = 17;

std::string Key(std::string_view prefix, std::string_view id) {
  std::string key;
  key.reserve(prefix.size() + id.size());
  key.append(prefix).append(id);
  return key;
}

std::string Header(char kind, int64_t seq) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kHeaderSize, kind);
  for (int i = 0; i < 16; ++i) out[16 - i] = kHex[(static_cast<uint64_t>(seq) >> (4 * i)) & 0xF];
  return out;
}

Result<int64_t> HeaderSeq(std::string_view value) {
  uint64_t seq = 0;
  if (value.size() < kHeaderSize || (value[0] != 'P' && value[0] != 'T') ||
      std::from_chars(value.data() + 1, value.data() + kHeaderSize, seq, 16).ec != std::errc()) {
    return MakeError(ErrorCode::kCorruption, "unreadable registry record");
  }
  return static_cast<int64_t>(seq);
}

// The provider in a stored value, or nullopt for a tombstone.
Result<std::optional<Provider>> ProviderOf(std::string_view value) {
  RETURN_IF_ERROR(HeaderSeq(value));
  if (value[0] == 'T') return std::optional<Provider>();
  ASSIGN_OR_RETURN(auto provider, DecodeProvider(value.substr(kHeaderSize)));
  return std::optional<Provider>(std::move(provider));
}

}  // namespace

RegistryProjection::RegistryProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics)
    : store_(store), waiters_(waiters), applied_(metrics, kName) {}

Result<int64_t> RegistryProjection::CurrentSeq(const std::string& id,
                                               const StoreBatch& batch) const {
  ASSIGN_OR_RETURN(auto value, store_->Get(Key(kProviderKey, id), &batch));
  if (!value) return -1;
  return HeaderSeq(*value);
}

Status RegistryProjection::Upsert(const Provider& provider, StoreBatch& batch) {
  ASSIGN_OR_RETURN(int64_t current, CurrentSeq(provider.id, batch));
  if (provider.seq <= current) return OkStatus();  // a duplicate or an older decision
  batch.Put(Key(kProviderKey, provider.id), Header('P', provider.seq) + EncodeProvider(provider));
  if (!listeners_.empty()) changes_.push_back({provider.id, provider, "", "", 0});
  return OkStatus();
}

Status RegistryProjection::Tombstone(const std::string& id, const ProviderOutcome& outcome,
                                     int64_t time_ms, StoreBatch& batch) {
  ASSIGN_OR_RETURN(int64_t current, CurrentSeq(id, batch));
  if (outcome.seq <= current) return OkStatus();
  batch.Put(Key(kProviderKey, id), Header('T', outcome.seq));
  if (!listeners_.empty()) {
    changes_.push_back(
        {id, std::nullopt, ProviderOutcomeType(outcome.kind), outcome.request_id, time_ms});
  }
  return OkStatus();
}

bool RegistryProjection::TakeOwn(int32_t partition, int64_t offset) {
  std::lock_guard lock(own_mu_);
  auto it = own_.find(partition);
  if (it == own_.end()) return false;
  auto& offsets = it->second;
  const bool found = offsets.erase(offset) > 0;
  offsets.erase(offsets.begin(), offsets.lower_bound(offset));
  if (offsets.empty()) own_.erase(it);
  return found;
}

Status RegistryProjection::Apply(const CloudEvent& event, const EventPosition& position,
                                 StoreBatch& batch) {
  if (TakeOwn(position.partition, position.offset)) {  // marked since the runner asked
    applied_request_ids_.emplace_back();  // applied and answered already: no waiter to complete
    applied_at_.emplace_back();
    return OkStatus();
  }
  return ApplyOwn(event, position, batch);
}

Status RegistryProjection::ApplyOwn(const CloudEvent& event, const EventPosition& position,
                                    StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto outcome, DecodeProviderOutcome(event));
  if (outcome.request_id.empty()) {
    return MakeError(ErrorCode::kCorruption, "outcome without request_id");
  }
  Provider& provider = outcome.provider;
  provider.seq = outcome.seq;
  const int64_t time_ms = ParseRfc3339(event.time).value_or(0);
  switch (outcome.kind) {
    case OutcomeKind::kRegistered:
    case OutcomeKind::kUpdated:
      RETURN_IF_ERROR(Upsert(provider, batch));
      break;
    case OutcomeKind::kIdChanged:
      RETURN_IF_ERROR(Tombstone(outcome.old_id, outcome, time_ms, batch));
      RETURN_IF_ERROR(Upsert(provider, batch));
      break;
    case OutcomeKind::kDeleted:
    case OutcomeKind::kExpired:
      RETURN_IF_ERROR(Tombstone(provider.id, outcome, time_ms, batch));
      break;
    case OutcomeKind::kRejected:
      break;
  }
  batch.Put(Key(kRequestKey, outcome.request_id), event.type);
  applied_.Inc(event.type);
  applied_request_ids_.push_back(std::move(outcome.request_id));
  applied_at_.push_back({position.partition, position.offset});
  return OkStatus();
}

void RegistryProjection::AfterCommit(const std::vector<CloudEvent>& applied) {
  // applied[i] is the event whose request id Apply recorded i-th in this batch.
  if (waiters_ && applied.size() == applied_request_ids_.size()) {
    for (size_t i = 0; i < applied.size() && waiters_->Pending() > 0; ++i) {
      waiters_->Complete(applied_request_ids_[i], applied[i], applied_at_[i]);
    }
  }
  applied_request_ids_.clear();
  applied_at_.clear();
  if (!changes_.empty()) {
    for (const auto& listener : listeners_) listener(changes_);
  }
  changes_.clear();
}

void RegistryProjection::Committed(const std::vector<std::pair<int32_t, int64_t>>& positions,
                                   const std::vector<CloudEvent>& applied) {
  {
    std::lock_guard lock(own_mu_);
    for (const auto& [partition, offset] : positions) own_[partition].insert(offset);
  }
  AfterCommit(applied);
}

void RegistryProjection::Abandoned() {
  applied_request_ids_.clear();
  applied_at_.clear();
  changes_.clear();
}

Result<std::optional<Provider>> RegistryView::Get(const std::string& id) const {
  ASSIGN_OR_RETURN(auto value, store_->Get(Key(kProviderKey, id)));
  if (!value) return std::optional<Provider>();
  return ProviderOf(*value);
}

Result<ProviderPage> RegistryView::List(const ProviderFilter& filter, const std::string& page_token,
                                        size_t max_page_size) const {
  ASSIGN_OR_RETURN(const std::string start_after, DecodePageToken(page_token));
  ProviderPage page;
  bool more = false;
  Status decode_status = OkStatus();
  RETURN_IF_ERROR(
      store_->Scan(kProviderKey, start_after, [&](std::string_view, std::string_view v) {
        auto stored = ProviderOf(v);
        if (!stored) {
          decode_status = tl::unexpected(stored.error());
          return false;
        }
        if (!*stored) return true;  // a tombstone
        auto& provider = *stored;
        if (!filter.service_type.empty() && provider->spec.service_type != filter.service_type) {
          return true;
        }
        if (filter.accept && !filter.accept(*provider)) return true;
        if (page.providers.size() == max_page_size) {
          more = true;
          return false;
        }
        page.providers.push_back(std::move(*provider));
        return true;
      }));
  RETURN_IF_ERROR(decode_status);
  if (more && !page.providers.empty()) {
    page.next_page_token = EncodePageToken(page.providers.back().id);
  }
  return page;
}

Result<bool> RegistryView::HasOutcome(const std::string& request_id) const {
  ASSIGN_OR_RETURN(auto record, OutcomeType(request_id));
  return record.has_value();
}

Result<std::optional<std::string>> RegistryView::OutcomeType(const std::string& request_id) const {
  return store_->Get(Key(kRequestKey, request_id));
}

}  // namespace dcm
