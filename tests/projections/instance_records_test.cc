// The instance records' stored bytes (a format: a store written by an older build must read the
// same) and their API representation, both from one field table per record.
#include "projections/instance_records.h"

#include <gtest/gtest.h>

namespace dcm {
namespace {

using namespace instance_records;  // NOLINT(google-build-using-namespace)

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z

TEST(InstanceRecordsTest, StoredBytesKeepTheirFormat) {
  Resource r;
  r.id = "res-1";
  r.root = "c1";
  r.catalog_item_instance_id = "c1";
  r.provider_name = "p1";
  r.provider_id = "id-p1";
  r.service_type = "vm";
  r.intent = R"({"a":1})";
  r.spec = R"({"a":2})";
  r.policy = "builtin";
  r.status = "PLACED";
  r.create_time_ms = kT0;
  r.update_time_ms = kT0 + 1;
  EXPECT_EQ(EncodeResource(r),
            R"({"id":"res-1","root":"c1","catalog_item_instance_id":"c1","provider_name":"p1",)"
            R"("provider_id":"id-p1","service_type":"vm","intent":"{\"a\":1}",)"
            R"("spec":"{\"a\":2}","policy":"builtin","status":"PLACED",)"
            R"("create_time_ms":1767225600000,"update_time_ms":1767225600001})");
  EXPECT_EQ(*DecodeResource(EncodeResource(r)), r);

  CleanupRecord q;
  q.instance_id = "i-1";
  q.root = "c1";
  q.retry_count = 2;
  q.requested_at_ms = kT0;
  EXPECT_EQ(EncodeCleanupRecord(q),
            R"({"instance_id":"i-1","root":"c1","provider_name":"","provider_id":"",)"
            R"("service_type":"","requested_at_ms":1767225600000,"retry_count":2,)"
            R"("status":"PENDING","last_attempt_ms":0,"last_error":""})");
  EXPECT_EQ(*DecodeCleanupRecord(EncodeCleanupRecord(q)), q);

  ServiceTypeInstance s;
  s.id = "i-1";
  s.deleted = true;
  EXPECT_EQ(EncodeServiceTypeInstance(s),
            R"({"id":"i-1","root":"","provider_name":"","provider_id":"","service_type":"",)"
            R"("spec":"{}","status":"","deleted":true,"create_time_ms":0,"update_time_ms":0})");
  EXPECT_EQ(*DecodeServiceTypeInstance(EncodeServiceTypeInstance(s)), s);

  CatalogItemInstance c;
  c.id = "c1";
  EXPECT_EQ(EncodeCatalogItemInstance(c),
            R"({"id":"c1","display_name":"","spec":"{}","resource_id":"","provider_name":"",)"
            R"("create_time_ms":0,"update_time_ms":0})");
  EXPECT_EQ(*DecodeCatalogItemInstance(EncodeCatalogItemInstance(c)), c);
}

TEST(InstanceRecordsTest, RejectsFieldsOfTheWrongType) {
  EXPECT_FALSE(DecodeResource(R"({"id":1})"));
  EXPECT_FALSE(DecodeCleanupRecord(R"({"retry_count":"x"})"));
  EXPECT_FALSE(DecodeServiceTypeInstance(R"({"deleted":"yes"})"));
  EXPECT_FALSE(DecodeCatalogItemInstance("[]"));
}

TEST(InstanceRecordsTest, TheApiShowsTheSpecBeforeTheIntentAndTheJoinedStatus) {
  Resource r;
  r.id = "res-1";
  r.intent = R"({"a":1})";
  r.spec = R"({"a":2})";
  r.status = "PLACED";
  JsonWriter w;
  w.BeginObject();
  WriteApiFields(w, r, "READY");
  w.EndObject();
  EXPECT_EQ(
      w.Take(),
      R"({"id":"res-1","provider_name":"","service_type":"","spec":{"a":2},)"
      R"("intent":{"a":1},"policy":"","status":"READY",)"
      R"("create_time":"1970-01-01T00:00:00.000Z","update_time":"1970-01-01T00:00:00.000Z"})");
}

}  // namespace
}  // namespace dcm
