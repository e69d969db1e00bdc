#include "src/http/federation_params.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace dcm::http {
namespace {

tl::unexpected<Error> Invalid(const std::string& field, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, field + " " + why, {{field, why}});
}

Result<int64_t> ParseCount(const std::string& field, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return Invalid(field, "must be a non-negative integer");
  }
  return value;
}

Result<double> ParseAmount(const std::string& field, const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return Invalid(field, "must be a non-negative number");
  }
  return value;
}

Result<int64_t> ParseBytes(const std::string& field, const std::string& text) {
  auto bytes = ParseMemoryQuantity(text);
  if (!bytes) return Invalid(field, "must be bytes or a quantity such as 4Gi");
  return *bytes;
}

// Sets the selector field named `name` from `value`; false when no field has that name.
Result<bool> SetField(FlavorSelector& s, const std::string& name, const std::string& value) {
  using Count = std::optional<int64_t> FlavorSelector::*;
  using Amount = std::optional<double> FlavorSelector::*;
  using Text = std::optional<std::string> FlavorSelector::*;
  static const std::pair<std::string_view, Text> kTexts[] = {
      {"flavor_id", &FlavorSelector::flavor_id},
      {"service_type", &FlavorSelector::service_type},
      {"region", &FlavorSelector::region}};
  static const std::pair<std::string_view, Count> kCounts[] = {
      {"instances_available_min", &FlavorSelector::instances_available_min},
      {"instances_available_max", &FlavorSelector::instances_available_max}};
  static const std::pair<std::string_view, Count> kBytes[] = {
      {"memory_available_min", &FlavorSelector::memory_available_min},
      {"memory_available_max", &FlavorSelector::memory_available_max}};
  static const std::pair<std::string_view, Amount> kAmounts[] = {
      {"cpu_available_min", &FlavorSelector::cpu_available_min},
      {"cpu_available_max", &FlavorSelector::cpu_available_max},
      {"price_min", &FlavorSelector::price_min},
      {"price_max", &FlavorSelector::price_max}};
  for (const auto& [key, field] : kTexts) {
    if (key != name) continue;
    s.*field = value;
    return true;
  }
  for (const auto& [key, field] : kCounts) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseCount(name, value));
    return true;
  }
  for (const auto& [key, field] : kBytes) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseBytes(name, value));
    return true;
  }
  for (const auto& [key, field] : kAmounts) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseAmount(name, value));
    return true;
  }
  return false;
}

}  // namespace

Result<FlavorSelector> ParseFlavorSelector(const HttpRequest& request) {
  FlavorSelector selector;
  for (const auto& [name, value] : request.query) {
    ASSIGN_OR_RETURN(bool known, SetField(selector, name, value));
    if (!known) return Invalid(name, "is not a flavour selector field");
  }
  return selector;
}

}  // namespace dcm::http
