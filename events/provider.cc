#include "events/provider.h"

#include <algorithm>
#include <cctype>

#include "events/json_read.h"
#include "src/common/url.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool MatchesSchemaVersion(std::string_view v) {
  // ^v[0-9]+(alpha|beta)?[0-9]*$
  if (v.size() < 2 || v[0] != 'v') return false;
  size_t i = 1;
  const auto digits = [&] {
    size_t start = i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    return i - start;
  };
  if (digits() == 0) return false;
  if (v.substr(i).starts_with("alpha"))
    i += 5;
  else if (v.substr(i).starts_with("beta"))
    i += 4;
  digits();
  return i == v.size();
}

// Reads an optional string member into `out`; records a field error on a wrong type.
bool ReadString(simdjson::dom::object body, std::string_view key, std::string_view alt,
                std::string* out, std::vector<FieldError>* errors, bool* present = nullptr) {
  auto value = Member(body, key, alt);
  if (present) *present = value.has_value() && !value->is_null();
  if (!value || value->is_null()) return false;
  std::string_view text;
  if (value->get(text)) {
    errors->push_back(
        {std::string(key), std::string("must be a string, got ") + JsonTypeName(*value)});
    return false;
  }
  out->assign(text);
  return true;
}

void ValidateMetadata(simdjson::dom::element metadata, ProviderSpec* spec,
                      std::vector<FieldError>* errors) {
  if (!metadata.is_object()) {
    errors->push_back(
        {"metadata", std::string("must be an object, got ") + JsonTypeName(metadata)});
    return;
  }
  for (const char* key : {"region_code", "zone"}) {
    simdjson::dom::element v;
    if (!metadata.at_key(key).get(v) && !v.is_string() && !v.is_null()) {
      errors->push_back({std::string("metadata.") + key, "must be a string"});
    }
  }
  simdjson::dom::element resources;
  if (!metadata.at_key("resources").get(resources) && !resources.is_object() &&
      !resources.is_null()) {
    errors->push_back({"metadata.resources", "must be an object"});
  }
  spec->metadata = Minify(metadata);
  if (spec->metadata.size() > kMaxMetadataBytes) {
    errors->push_back({"metadata", "must be at most 64 KiB"});
  }
}

void ValidateOperations(simdjson::dom::element ops, ProviderSpec* spec,
                        std::vector<FieldError>* errors) {
  simdjson::dom::array array;
  if (ops.get(array)) {
    errors->push_back({"operations", std::string("must be an array, got ") + JsonTypeName(ops)});
    return;
  }
  size_t index = 0;
  for (auto item : array) {
    const std::string field = "operations[" + std::to_string(index++) + "]";
    std::string_view text;
    if (item.get(text)) {
      errors->push_back({field, "must be a string"});
      continue;
    }
    std::string op = Lower(text);
    if (op != "create" && op != "read" && op != "update" && op != "delete") {
      errors->push_back({field, "must be one of create, read, update, delete"});
      continue;
    }
    if (std::find(spec->operations.begin(), spec->operations.end(), op) == spec->operations.end()) {
      spec->operations.push_back(std::move(op));
    }
  }
}

// `liveness` (SPEC §8): probe (default), heartbeat, both; any case.
void ValidateLiveness(simdjson::dom::element value, ProviderSpec* spec,
                      std::vector<FieldError>* errors) {
  std::string_view text;
  if (value.get(text)) {
    errors->push_back({"liveness", std::string("must be a string, got ") + JsonTypeName(value)});
    return;
  }
  const std::string liveness = Lower(text);
  if (liveness == "probe") {
    spec->liveness = Liveness::kProbe;
  } else if (liveness == "heartbeat") {
    spec->liveness = Liveness::kHeartbeat;
  } else if (liveness == "both") {
    spec->liveness = Liveness::kBoth;
  } else {
    errors->push_back({"liveness", "must be one of probe, heartbeat, both"});
  }
}

}  // namespace

const char* LivenessName(Liveness liveness) {
  switch (liveness) {
    case Liveness::kHeartbeat:
      return "heartbeat";
    case Liveness::kBoth:
      return "both";
    case Liveness::kProbe:
      break;
  }
  return "probe";
}

std::string ValidateProviderName(std::string_view name) {
  if (name.empty() || name.size() > 63) return "must be 1-63 characters";
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') {
      return "may contain only letters, digits, '.', '_' and '-'";
    }
  }
  if (!IsAlnum(name.front()) || !IsAlnum(name.back())) {
    return "must start and end with a letter or digit";
  }
  return "";
}

std::string ValidateProviderId(std::string_view id) {
  if (IsUuid(id)) return "";
  if (id.empty() || id.size() > 63) return "must be a UUID or a DNS label of 1-63 characters";
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return "must be a UUID or a lowercase DNS label ([a-z0-9-])";
    }
  }
  if (id.front() == '-' || id.back() == '-') return "must start and end with [a-z0-9]";
  return "";
}

Result<ProviderSpec> ParseProviderSpec(simdjson::dom::element element, const ProviderRules& rules) {
  const std::vector<std::string>& service_types = rules.service_types;
  simdjson::dom::object body;
  if (element.get(body)) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        std::string("request body must be a JSON object, got ") + JsonTypeName(element),
        {{"body", "must be a JSON object"}});
  }
  ProviderSpec spec;
  std::vector<FieldError> errors;
  bool present = false;
  if (ReadString(body, "name", "", &spec.name, &errors, &present)) {
    if (auto why = ValidateProviderName(spec.name); !why.empty()) errors.push_back({"name", why});
  } else if (!present) {
    errors.push_back({"name", "is required"});
  }
  if (ReadString(body, "display_name", "displayName", &spec.display_name, &errors) &&
      spec.display_name.size() > kMaxDisplayNameLength) {
    errors.push_back({"display_name", "must be at most 256 characters"});
  }
  if (ReadString(body, "endpoint", "", &spec.endpoint, &errors, &present)) {
    if (auto url = ParseHttpUrl(spec.endpoint); !url) {
      errors.push_back({"endpoint", url.error().message});
    } else if (rules.refuse_endpoint_host) {
      if (auto why = rules.refuse_endpoint_host(url->host); !why.empty()) {
        errors.push_back({"endpoint", why});
      }
    }
  } else if (!present) {
    errors.push_back({"endpoint", "is required"});
  }
  if (ReadString(body, "service_type", "serviceType", &spec.service_type, &errors, &present)) {
    if (std::find(service_types.begin(), service_types.end(), spec.service_type) ==
        service_types.end()) {
      std::string known;
      for (const auto& t : service_types) known += (known.empty() ? "" : ", ") + t;
      errors.push_back({"service_type",
                        "unknown service type '" + spec.service_type + "' (known: " + known + ")"});
    }
  } else if (!present) {
    errors.push_back({"service_type", "is required"});
  }
  if (ReadString(body, "schema_version", "schemaVersion", &spec.schema_version, &errors) &&
      !MatchesSchemaVersion(spec.schema_version)) {
    errors.push_back({"schema_version", "must match ^v[0-9]+(alpha|beta)?[0-9]*$"});
  }
  if (spec.schema_version.empty()) spec.schema_version = std::string(kDefaultSchemaVersion);
  if (auto ops = Member(body, "operations"); ops && !ops->is_null()) {
    ValidateOperations(*ops, &spec, &errors);
  }
  if (auto metadata = Member(body, "metadata"); metadata && !metadata->is_null()) {
    ValidateMetadata(*metadata, &spec, &errors);
  }
  if (auto liveness = Member(body, "liveness"); liveness && !liveness->is_null()) {
    ValidateLiveness(*liveness, &spec, &errors);
  }
  if (!errors.empty()) {
    std::string detail = "invalid provider: " + errors.front().field + " " + errors.front().message;
    if (errors.size() > 1) detail += " (and " + std::to_string(errors.size() - 1) + " more)";
    return MakeError(ErrorCode::kInvalidArgument, detail, std::move(errors));
  }
  return spec;
}

void WriteProviderSpecFields(JsonWriter& w, const ProviderSpec& spec) {
  w.Field("name", spec.name);
  w.Field("display_name", spec.display_name);
  w.Field("endpoint", spec.endpoint);
  w.Field("service_type", spec.service_type);
  w.Field("schema_version", spec.schema_version);
  w.StringArray("operations", spec.operations);
  w.Key("metadata");
  w.Raw(spec.metadata);
  if (spec.liveness != Liveness::kProbe) w.Field("liveness", LivenessName(spec.liveness));
}

void WriteProvider(JsonWriter& w, const Provider& p) {
  w.BeginObject();
  w.Field("id", p.id);
  WriteProviderSpecFields(w, p.spec);
  w.Field("create_time", p.create_time);
  w.Field("update_time", p.update_time);
  w.Field("seq", p.seq);
  if (!p.owner.empty()) w.Field("owner", p.owner);
  w.EndObject();
}

std::string EncodeProvider(const Provider& provider) {
  JsonWriter w;
  WriteProvider(w, provider);
  return w.Take();
}

Result<Provider> ReadProvider(simdjson::dom::element element) {
  simdjson::dom::object object;
  if (element.get(object)) return MakeError(ErrorCode::kCorruption, "provider is not an object");
  Provider p;
  std::vector<FieldError> errors;
  ReadString(object, "id", "", &p.id, &errors);
  ReadString(object, "name", "", &p.spec.name, &errors);
  ReadString(object, "display_name", "", &p.spec.display_name, &errors);
  ReadString(object, "endpoint", "", &p.spec.endpoint, &errors);
  ReadString(object, "service_type", "", &p.spec.service_type, &errors);
  ReadString(object, "schema_version", "", &p.spec.schema_version, &errors);
  ReadString(object, "create_time", "", &p.create_time, &errors);
  ReadString(object, "update_time", "", &p.update_time, &errors);
  ReadString(object, "owner", "", &p.owner, &errors);
  if (auto ops = Member(object, "operations"); ops && ops->is_array()) {
    for (auto op : simdjson::dom::array(*ops)) {
      std::string_view text;
      if (!op.get(text)) p.spec.operations.emplace_back(text);
    }
  }
  if (auto metadata = Member(object, "metadata"); metadata && metadata->is_object()) {
    p.spec.metadata = Minify(*metadata);
  }
  // Providers from before SPEC §8 have no `liveness`: they are probed.
  if (const std::string liveness = StringMember(object, "liveness"); liveness == "heartbeat") {
    p.spec.liveness = Liveness::kHeartbeat;
  } else if (liveness == "both") {
    p.spec.liveness = Liveness::kBoth;
  }
  if (auto seq = Member(object, "seq")) {
    int64_t v = 0;
    if (!seq->get(v)) p.seq = v;
  }
  if (!errors.empty() || p.id.empty() || p.spec.name.empty()) {
    return MakeError(ErrorCode::kCorruption, "provider record is missing id or name");
  }
  return p;
}

Result<Provider> DecodeProvider(std::string_view json) {
  ASSIGN_OR_RETURN(auto element, ParseJson(json));
  return ReadProvider(element);
}

}  // namespace dcm
