// The federation events' codec (SPEC §10): every type round-trips, required fields and value
// ranges are checked (requests: kInvalidArgument, so the decider refuses them 400; outcomes:
// kCorruption, poison), and answers map to the peer API's statuses.
#include "events/federation_events.h"

#include <gtest/gtest.h>

#include <string>

namespace dcm {
namespace {

constexpr int64_t kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

ReservationReceived Received() {
  ReservationReceived r;
  r.event_id = "11111111-2222-4333-8444-555555555555";
  r.source = "dcm/federation-api";
  r.time_ms = kT0;
  r.actor = "dcm-enclave://a";
  r.reservation_id = "res-1";
  r.flavor_id = "fl-1";
  r.consumer = "a";
  r.spec = R"({"cpu":1})";
  r.ttl_ms = 30000;
  return r;
}

ReservationRelayRequested RelayRequest() {
  ReservationRelayRequested r;
  r.time_ms = kT0;
  r.reservation_id = "res-1";
  r.flavor_id = "fl-1";
  r.consumer = "a";
  r.next_hop = "c";
  r.owner = "o";
  return r;
}

template <typename T>
void ExpectRequestRoundTrip(const T& typed) {
  const CloudEvent event = EncodeFederationRequest(typed);
  EXPECT_EQ(event.type, T::kType);
  auto decoded = DecodeFederationRequest(event);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  T expected = typed;
  expected.event_id = event.id;  // a new UUIDv4 when none was given
  expected.subject = event.subject;
  EXPECT_EQ(std::get<T>(*decoded), expected);
}

template <typename T>
void ExpectOutcomeRoundTrip(T typed) {
  typed.request_id = "req-1";
  typed.seq = 7;
  typed.request_type = event_type::kReservationReceived;
  typed.reservation_id = "res-1";
  typed.consumer = "a";
  typed.flavor_id = "fl-1";
  typed.time_ms = kT0;
  typed.source = "dcm/federation";
  const CloudEvent event = EncodeFederationOutcome(typed);
  EXPECT_EQ(event.id, FederationOutcomeId("req-1"));
  auto decoded = DecodeFederationOutcome(event);
  ASSERT_TRUE(decoded.has_value()) << T::kType << ": " << decoded.error().message;
  T expected = typed;
  expected.event_id = event.id;
  expected.subject = event.subject;
  EXPECT_EQ(std::get<T>(*decoded), expected);
}

TEST(FederationEventsTest, EveryRequestTypeRoundTrips) {
  ExpectRequestRoundTrip(Received());
  ReservationConfirmRequested confirm;
  confirm.time_ms = kT0;
  confirm.reservation_id = "res-1";
  confirm.consumer = "a";
  ExpectRequestRoundTrip(confirm);
  ExpectRequestRoundTrip(ReservationReleaseRequested{confirm});
  ReservationExpiryDue hold_due;
  hold_due.time_ms = kT0;
  hold_due.reservation_id = "res-1";
  hold_due.expires_at_ms = kT0 - 1000;
  ExpectRequestRoundTrip(hold_due);
  ContractRenewalRequested renew;
  renew.time_ms = kT0;
  renew.contract_id = "c-1";
  renew.consumer = "a";
  ExpectRequestRoundTrip(renew);
  ExpectRequestRoundTrip(ContractTerminationRequested{renew});
  ContractRevocationRequested revoke;
  revoke.time_ms = kT0;
  revoke.contract_id = "c-1";
  ExpectRequestRoundTrip(revoke);  // no reason: optional
  revoke.reason = "maintenance";
  ExpectRequestRoundTrip(revoke);
  ContractExpiryDue contract_due;
  contract_due.time_ms = kT0;
  contract_due.contract_id = "c-1";
  contract_due.expires_at_ms = kT0;
  ExpectRequestRoundTrip(contract_due);
  ExpectRequestRoundTrip(RelayRequest());
}

TEST(FederationEventsTest, EveryOutcomeTypeRoundTrips) {
  ReservationHeld held;
  held.spec = R"({"cpu":1})";
  held.expires_at_ms = kT0 + 30000;
  held.capacity = 2;
  ExpectOutcomeRoundTrip(held);
  held.repeat = true;
  ExpectOutcomeRoundTrip(held);
  ReservationRefused refused;
  refused.reason = refusal::kNoCapacity;
  refused.status = 409;
  refused.detail = "full";
  ExpectOutcomeRoundTrip(refused);
  ReservationExpired expired;
  expired.expires_at_ms = kT0;
  ExpectOutcomeRoundTrip(expired);
  ExpectOutcomeRoundTrip(ReservationReleased{});
  ContractSigned signed_;
  signed_.contract_id = "c-1";
  signed_.remote_instance_id = "i-1";
  signed_.expires_at_ms = kT0 + 600000;
  signed_.spec = R"({"cpu":1})";
  ExpectOutcomeRoundTrip(signed_);
  ContractFact fact;
  fact.contract_id = "c-1";
  fact.remote_instance_id = "i-1";
  fact.expires_at_ms = kT0 + 600000;
  ExpectOutcomeRoundTrip(ContractRenewed{fact});
  ExpectOutcomeRoundTrip(ContractExpired{fact});
  ExpectOutcomeRoundTrip(ContractTerminated{fact});
  ContractRevoked revoked;
  static_cast<ContractFact&>(revoked) = fact;
  revoked.reason = "maintenance";
  ExpectOutcomeRoundTrip(revoked);
  ReservationRelayed relayed;
  relayed.next_hop = "c";
  relayed.owner = "o";
  relayed.contract_id = "c-1";
  ExpectOutcomeRoundTrip(relayed);
  relayed.repeat = true;
  ExpectOutcomeRoundTrip(relayed);
}

TEST(FederationEventsTest, SubjectsNameTheEntityAndOutcomeIdsDeriveFromTheRequest) {
  EXPECT_EQ(EncodeFederationRequest(Received()).subject, "res-1");
  ContractSigned signed_;
  signed_.request_id = "req-1";
  signed_.reservation_id = "res-1";
  signed_.contract_id = "c-1";
  EXPECT_EQ(EncodeFederationOutcome(signed_).subject, "c-1");
  ReservationRefused refused;
  refused.request_id = "req-2";
  refused.contract_id = "c-9";  // a call on an unknown contract: no reservation id
  refused.status = 404;
  EXPECT_EQ(EncodeFederationOutcome(refused).subject, "c-9");
  EXPECT_EQ(FederationOutcomeId("req-1"), FederationOutcomeId("req-1"));
  EXPECT_NE(FederationOutcomeId("req-1"), FederationOutcomeId("req-2"));
}

TEST(FederationEventsTest, ARequestWithAMissingOrBadFieldIsInvalidNotPoison) {
  CloudEvent event = EncodeFederationRequest(Received());
  for (const char* data :
       {R"({"flavor_id":"fl-1","consumer":"a","spec":{},"ttl_ms":1})",
        R"({"reservation_id":"","flavor_id":"fl-1","consumer":"a","spec":{},"ttl_ms":1})",
        R"({"reservation_id":"r","flavor_id":"fl-1","consumer":"a","spec":"x","ttl_ms":1})",
        R"({"reservation_id":"r","flavor_id":"fl-1","consumer":"a","spec":{},"ttl_ms":-5})",
        R"({"reservation_id":"r","flavor_id":"fl-1","consumer":"a","spec":{},"ttl_ms":0})",
        R"({"reservation_id":7,"flavor_id":"fl-1","consumer":"a","spec":{},"ttl_ms":1})"}) {
    event.data = data;
    auto decoded = DecodeFederationRequest(event);
    ASSERT_FALSE(decoded.has_value()) << data;
    EXPECT_EQ(decoded.error().code, ErrorCode::kInvalidArgument) << data;
    EXPECT_FALSE(decoded.error().fields.empty()) << data;
  }
}

TEST(FederationEventsTest, ARelayRequestWithAnEmptyOrMissingFieldIsInvalid) {
  using R = ReservationRelayRequested;
  const std::pair<const char*, std::string R::*> fields[] = {{"reservation_id", &R::reservation_id},
                                                             {"flavor_id", &R::flavor_id},
                                                             {"consumer", &R::consumer},
                                                             {"next_hop", &R::next_hop},
                                                             {"owner", &R::owner}};
  for (const auto& [name, member] : fields) {
    R empty = RelayRequest();
    empty.*member = "";
    CloudEvent missing = EncodeFederationRequest(RelayRequest());
    const std::string key = std::string("\"") + name + "\":";
    missing.data.replace(missing.data.find(key), key.size(),
                         "\"renamed_" + std::string(name) + "\":");
    for (const CloudEvent& event : {EncodeFederationRequest(empty), missing}) {
      auto decoded = DecodeFederationRequest(event);
      ASSERT_FALSE(decoded.has_value()) << event.data;
      EXPECT_EQ(decoded.error().code, ErrorCode::kInvalidArgument) << event.data;
      ASSERT_EQ(decoded.error().fields.size(), 1u) << event.data;
      EXPECT_EQ(decoded.error().fields[0].field, name);
    }
  }
  ReservationRelayed no_contract;
  no_contract.request_id = "r";
  no_contract.request_type = event_type::kReservationRelayRequested;
  no_contract.next_hop = "c";
  no_contract.owner = "o";
  EXPECT_EQ(DecodeFederationOutcome(EncodeFederationOutcome(no_contract)).error().code,
            ErrorCode::kCorruption);
  EXPECT_TRUE(IsFederationRequestType(event_type::kReservationRelayRequested));
  EXPECT_TRUE(IsFederationOutcomeType(event_type::kReservationRelayed));
  EXPECT_FALSE(IsFederationOutcomeType(event_type::kReservationRelayRequested));
}

TEST(FederationEventsTest, UnknownTypesNewerSchemasAndBadTimesArePoison) {
  CloudEvent event = EncodeFederationRequest(Received());
  CloudEvent unknown = event;
  unknown.type = "dcm.reservation.teleported";
  EXPECT_EQ(DecodeFederationRequest(unknown).error().code, ErrorCode::kCorruption);
  CloudEvent newer = event;
  newer.schema_version = kFederationEventSchemaVersion + 1;
  EXPECT_EQ(DecodeFederationRequest(newer).error().code, ErrorCode::kCorruption);
  CloudEvent bad_time = event;
  bad_time.time = "yesterday";
  EXPECT_EQ(DecodeFederationRequest(bad_time).error().code, ErrorCode::kCorruption);
  ReservationRefused refused;
  refused.request_id = "r";
  refused.request_type = event_type::kReservationReceived;
  refused.reason = "x";
  refused.status = 200;  // not a refusal
  EXPECT_EQ(DecodeFederationOutcome(EncodeFederationOutcome(refused)).error().code,
            ErrorCode::kCorruption);
  CloudEvent outcome = EncodeFederationOutcome(ReservationReleased{});
  outcome.data = R"({"seq":1})";
  EXPECT_EQ(DecodeFederationOutcome(outcome).error().code, ErrorCode::kCorruption);
}

TEST(FederationEventsTest, AnswersMapToThePeerApiStatuses) {
  ReservationHeld held;
  EXPECT_EQ(FederationAnswerStatus(held), 201);
  held.repeat = true;
  EXPECT_EQ(FederationAnswerStatus(held), 200);
  ReservationExpired expired;
  expired.request_type = event_type::kReservationConfirmRequested;
  EXPECT_EQ(FederationAnswerStatus(expired), 410);
  expired.request_type = event_type::kReservationExpiryDue;
  EXPECT_EQ(FederationAnswerStatus(expired), 200);
  ContractExpired lapsed;
  lapsed.request_type = event_type::kContractRenewalRequested;
  EXPECT_EQ(FederationAnswerStatus(lapsed), 410);
  ReservationRefused refused;
  refused.status = 403;
  EXPECT_EQ(FederationAnswerStatus(refused), 403);
  EXPECT_EQ(FederationAnswerStatus(ContractSigned{}), 201);
  EXPECT_EQ(FederationAnswerStatus(ContractRenewed{}), 200);
  EXPECT_EQ(FederationAnswerStatus(ContractTerminated{}), 200);
  ReservationRelayed relayed;
  EXPECT_EQ(FederationAnswerStatus(relayed), 201);
  relayed.repeat = true;
  EXPECT_EQ(FederationAnswerStatus(relayed), 200);
}

}  // namespace
}  // namespace dcm
