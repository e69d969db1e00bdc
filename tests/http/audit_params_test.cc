// The audit endpoints' pure steps: parameters (audit_params.h) and JSON (audit_render.h).
#include "src/http/audit_params.h"

#include <gtest/gtest.h>

#include <string>

#include "src/http/audit_render.h"

namespace dcm::http {
namespace {

HttpRequest WithQuery(std::multimap<std::string, std::string> query) {
  HttpRequest request;
  request.method = "GET";
  request.path = "/api/v1alpha1/events";
  request.query = std::move(query);
  return request;
}

TEST(AuditParamsTest, ReadsFiltersWindowPageAndToken) {
  auto query = ParseAuditQuery(WithQuery({{"subject", "p1"},
                                          {"type", "dcm.provider.*"},
                                          {"since", "2026-01-01T00:00:00Z"},
                                          {"until", "2026-01-01T00:00:01Z"},
                                          {"max_page_size", "7"},
                                          {"page_token", "t"}}));
  ASSERT_TRUE(query) << query.error().message;
  EXPECT_EQ(query->subject, "p1");
  EXPECT_EQ(query->type, "dcm.provider.*");
  EXPECT_EQ(query->since_ms, 1767225600000);
  EXPECT_EQ(query->until_ms, 1767225601000);
  EXPECT_EQ(query->max_page_size, 7);
  EXPECT_EQ(query->page_token, "t");
}

TEST(AuditParamsTest, DefaultsToAnUnboundedWindowAndAFullPage) {
  auto query = ParseAuditQuery(WithQuery({}));
  ASSERT_TRUE(query);
  EXPECT_EQ(query->since_ms, 0);
  EXPECT_EQ(query->until_ms, 0);
  EXPECT_EQ(query->max_page_size, 100);
}

TEST(AuditParamsTest, RefusesATimeThatIsNotRfc3339NamingTheParameter) {
  auto query = ParseAuditQuery(WithQuery({{"since", "yesterday"}}));
  ASSERT_FALSE(query);
  EXPECT_EQ(query.error().code, ErrorCode::kInvalidArgument);
  ASSERT_EQ(query.error().fields.size(), 1u);
  EXPECT_EQ(query.error().fields[0].field, "since");
}

TEST(AuditParamsTest, RefusesUntilBeforeSince) {
  auto query = ParseAuditQuery(
      WithQuery({{"since", "2026-01-02T00:00:00Z"}, {"until", "2026-01-01T00:00:00Z"}}));
  ASSERT_FALSE(query);
  EXPECT_EQ(query.error().message, "until is before since");
}

TEST(AuditParamsTest, RefusesAPageSizeOutOfRange) {
  auto query = ParseAuditQuery(WithQuery({{"max_page_size", "101"}}));
  ASSERT_FALSE(query);
  EXPECT_EQ(query.error().fields[0].field, "max_page_size");
}

TEST(AuditParamsTest, AsOfMustBeAfter1970) {
  EXPECT_EQ(*ParseAsOf(WithQuery({{"as_of", "2026-01-01T00:00:00Z"}})), 1767225600000);
  auto epoch = ParseAsOf(WithQuery({{"as_of", "1970-01-01T00:00:00Z"}}));
  ASSERT_FALSE(epoch);
  EXPECT_EQ(epoch.error().message, "as_of must be after 1970");
  EXPECT_FALSE(ParseAsOf(WithQuery({})));  // absent is 0: not after 1970
}

TEST(AuditRenderTest, EventsPageHoldsTheStoredEventsVerbatimAndTheNextToken) {
  AuditPage page;
  page.entries.push_back(AuditEntry{"dcm.providers", 0, 1, 0, R"({"id":"e1"})"});
  page.next_page_token = "next";
  EXPECT_EQ(RenderEventsPage(page), R"({"events":[{"id":"e1"}],"next_page_token":"next"})");
  EXPECT_EQ(RenderEventsPage(AuditPage{}), R"({"events":[]})");
}

TEST(AuditRenderTest, HistoryLeavesOutWhatDoesNotDecode) {
  AuditPage page;
  page.entries.push_back(AuditEntry{"dcm.providers", 0, 1, 0, "not json"});
  EXPECT_EQ(RenderHistoryPage("p1", page), R"({"id":"p1","events":[]})");
}

}  // namespace
}  // namespace dcm::http
