// Size limits of what the control plane writes to Kafka (SPEC §7 "every event the control plane
// writes fits the broker's message.max.bytes"; docs/operations.md "Limits").
//
//   HTTP body (≤ 1 MiB) ─▶ request event ≤ kMaxRequestEventBytes, else 413, nothing produced
//   request ─▶ decider ─▶ outcome/fact ≤ kMaxEventBytes (a request under its limit always fits)
//   rejection records: detail, errors and attempted name/id cut to the kRejection* caps
//   a poison record ─▶ dead letter: copied as is up to kMaxEventBytes, else a truncated envelope
//
// kMaxEventBytes stays under librdkafka's producer default `message.max.bytes` (1,000,000) and
// Kafka's broker default (1,048,588), with room for the record's key, headers and framing. A
// request topic record larger than kMaxRequestEventBytes (produced straight to Kafka) is
// dead-lettered by the decider instead of decided, so no outcome can outgrow kMaxEventBytes.
#pragma once

#include <cstddef>

namespace dcm {

inline constexpr size_t kMaxEventBytes = 900 * 1024;
inline constexpr size_t kMaxRequestEventBytes = 512 * 1024;

// A dead letter for a record over kMaxEventBytes (key + value) keeps this much of its start.
inline constexpr size_t kDeadLetterHeadBytes = 4 * 1024;
// Keys and reasons longer than these are cut in dead letters.
inline constexpr size_t kDeadLetterKeyMaxBytes = 1024;
inline constexpr size_t kDeadLetterReasonMaxBytes = 1024;

// Rejection records (dcm.provider.rejected): what they copy from the request and its errors.
inline constexpr size_t kRejectionDetailMaxBytes = 1024;
inline constexpr size_t kRejectionMaxFieldErrors = 16;
inline constexpr size_t kRejectionFieldErrorMaxBytes = 256;  // each field name and message
inline constexpr size_t kRejectionAttemptedMaxBytes = 256;   // the attempted name and id

}  // namespace dcm
