// Fuzz target: a POST /providers body (or the data of a registration request). ParseJson, then
// ParseProviderSpec. Whatever is accepted must satisfy the provider rules of SPEC §3.1 and
// survive the stored form (EncodeProvider/DecodeProvider) unchanged.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "events/json_read.h"
#include "events/provider.h"
#include "src/common/url.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {
namespace {

void CheckInvariants(const ProviderSpec& spec) {
  FUZZ_CHECK(ValidateProviderName(spec.name).empty());
  FUZZ_CHECK(ParseHttpUrl(spec.endpoint).has_value());
  FUZZ_CHECK(std::find(kServiceTypes.begin(), kServiceTypes.end(), spec.service_type) !=
             kServiceTypes.end());
  FUZZ_CHECK(spec.display_name.size() <= kMaxDisplayNameLength);
  FUZZ_CHECK(spec.metadata.size() <= kMaxMetadataBytes);
  FUZZ_CHECK(!spec.metadata.empty() && spec.metadata.front() == '{');
  for (size_t i = 0; i < spec.operations.size(); ++i) {
    const auto& op = spec.operations[i];
    FUZZ_CHECK(op == "create" || op == "read" || op == "update" || op == "delete");
    FUZZ_CHECK(std::count(spec.operations.begin(), spec.operations.end(), op) == 1);
  }
}

}  // namespace

std::vector<std::string> Seeds() {
  return {
      R"({"name":"sp-1","endpoint":"http://sp1.example.com:8080/api","service_type":"vm"})",
      R"({"name":"SP_1.eu","displayName":"D","endpoint":"https://[2001:db8::1]:8443/",)"
      R"("serviceType":"database","schemaVersion":"v1beta2","operations":["CREATE","read","Read",)"
      R"("delete"],"metadata":{"region_code":"eu-1","zone":"a","resources":{"cpu":{"total":4}},)"
      R"("x":[1,2.5,null,true]}})",
      R"({"name":"a","endpoint":"http://h","service_type":"storage","display_name":null,)"
      R"("schema_version":null,"operations":null,"metadata":null,"id":"ignored",)"
      R"("unknown":{"deep":[1]}})",
      R"({"name":"-bad-","endpoint":"ftp://h","service_type":"gpu","operations":"create",)"
      R"("metadata":[]})",
      R"({"name":"x","endpoint":"http://u:p@h:0/","service_type":"vm","operations":["launch",1],)"
      R"("metadata":{"region_code":1,"resources":"r"}})",
      R"({"name":"caf\u00e9","endpoint":"http://h/\u0000","service_type":"network"})",
      "{}",
      "[]",
      "\"x\"",
      std::string(100, '[') + std::string(100, ']'),
  };
}

}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto element = dcm::ParseJson(input);
  if (!element) return 0;
  auto spec = dcm::ParseProviderSpec(*element, dcm::fuzz::kServiceTypes);
  if (!spec) {
    FUZZ_CHECK(spec.error().code == dcm::ErrorCode::kInvalidArgument);
    FUZZ_CHECK(!spec.error().fields.empty());
    return 0;
  }
  dcm::fuzz::CheckInvariants(*spec);
  const dcm::Provider provider{
      "p-1", *spec, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z", 1, "sp-owner"};
  auto stored = dcm::DecodeProvider(dcm::EncodeProvider(provider));
  FUZZ_CHECK(stored.has_value());
  FUZZ_CHECK(*stored == provider);
  return 0;
}
