#include "src/http/problem.h"

#include "src/common/json_writer.h"

namespace dcm::http {
namespace {

const char* Title(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

const char* TypeSlug(int status) {
  switch (status) {
    case 400:
      return "urn:dcm:problem:invalid-request";
    case 401:
      return "urn:dcm:problem:unauthenticated";
    case 403:
      return "urn:dcm:problem:forbidden";
    case 404:
      return "urn:dcm:problem:not-found";
    case 405:
      return "urn:dcm:problem:method-not-allowed";
    case 406:
      return "urn:dcm:problem:policy-rejected";
    case 409:
      return "urn:dcm:problem:conflict";
    case 413:
      return "urn:dcm:problem:payload-too-large";
    case 415:
      return "urn:dcm:problem:unsupported-media-type";
    case 422:
      return "urn:dcm:problem:unprocessable";
    case 502:
      return "urn:dcm:problem:provider-error";
    case 503:
      return "urn:dcm:problem:unavailable";
    default:
      return "urn:dcm:problem:internal";
  }
}

}  // namespace

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kForbidden:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kUnsupportedMediaType:
      return 415;
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
    case ErrorCode::kStorage:
      return 503;
    case ErrorCode::kCorruption:
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

HttpResponse Problem(int status, const std::string& detail, const std::vector<FieldError>& errors,
                     const std::optional<ConflictRef>& conflict) {
  JsonWriter w;
  w.BeginObject();
  w.Field("type", TypeSlug(status));
  w.Field("title", Title(status));
  w.Field("status", status);
  w.Field("detail", detail);
  if (!errors.empty()) {
    w.Key("errors");
    w.BeginArray();
    for (const auto& e : errors) {
      w.BeginObject();
      w.Field("field", e.field);
      w.Field("message", e.message);
      w.EndObject();
    }
    w.EndArray();
  }
  if (conflict) {
    w.Key("conflict");
    w.BeginObject();
    w.Field("id", conflict->id);
    w.Field("name", conflict->name);
    w.EndObject();
  }
  w.EndObject();
  HttpResponse response{status, "application/problem+json", w.Take(), {}};
  if (status == 503) response.headers.emplace_back("Retry-After", "1");
  return response;
}

HttpResponse ProblemFromError(const Error& error) {
  return Problem(HttpStatusFor(error.code), error.message, error.fields);
}

HttpResponse Json(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

}  // namespace dcm::http
