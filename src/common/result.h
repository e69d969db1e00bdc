// Errors are values. Result<T> is tl::expected<T, Error> marked [[nodiscard]] at the type, so an
// ignored result does not compile. No exception crosses a module boundary: code that calls a
// throwing library converts at the edge (FromRocksDb, FromKafka, the HTTP status mapping).
#pragma once

#include <string>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace dcm {

enum class ErrorCode {
  kInvalidArgument,       // bad input: HTTP 400
  kForbidden,             // the caller may not do this: HTTP 403
  kNotFound,              // HTTP 404
  kConflict,              // HTTP 409
  kPayloadTooLarge,       // HTTP 413
  kUnsupportedMediaType,  // HTTP 415
  kUnavailable,           // a dependency (Kafka, a decider) is down or slow: HTTP 503
  kTimeout,               // HTTP 503 as well; the write may still land
  kCorruption,            // stored data or an event cannot be decoded
  kStorage,               // the local store failed (disk full, I/O error, a corrupt file): 503
  kInternal,              // a bug or an unexpected library failure: HTTP 500
};

const char* ErrorCodeName(ErrorCode code);

// A field-level validation failure, rendered as problem+json `errors: [{field, message}]`.
struct FieldError {
  std::string field;
  std::string message;
  bool operator==(const FieldError&) const = default;
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::vector<FieldError> fields;  // only for kInvalidArgument
};

inline tl::unexpected<Error> MakeError(ErrorCode code, std::string message,
                                       std::vector<FieldError> fields = {}) {
  return tl::unexpected<Error>(Error{code, std::move(message), std::move(fields)});
}

template <class T>
class [[nodiscard]] Result : public tl::expected<T, Error> {
 public:
  using tl::expected<T, Error>::expected;
  // NOLINTNEXTLINE(google-explicit-constructor): implicit, like tl::expected's own.
  Result(tl::expected<T, Error> other) : tl::expected<T, Error>(std::move(other)) {}
};

using Status = Result<void>;

inline Status OkStatus() { return {}; }

}  // namespace dcm

#define DCM_CONCAT_INNER(a, b) a##b
#define DCM_CONCAT(a, b) DCM_CONCAT_INNER(a, b)

// Returns the error of `expr` (a Result) from the enclosing function.
#define RETURN_IF_ERROR(expr)                                                     \
  do {                                                                            \
    auto&& dcm_status_ = (expr);                                                  \
    if (!dcm_status_) return ::tl::unexpected<::dcm::Error>(dcm_status_.error()); \
  } while (0)

// `lhs = value of expr`, or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(DCM_CONCAT(dcm_r_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                              \
  auto tmp = (expr);                                                       \
  if (!tmp) return ::tl::unexpected<::dcm::Error>(std::move(tmp.error())); \
  lhs = std::move(*tmp)
