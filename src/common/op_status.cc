#include "common/op_status.h"

namespace anteroom {

WireError ToWire(OpStatus status) {
  switch (status) {
    case OpStatus::kOk:
      return {200, "ok"};
    case OpStatus::kInvalidJson:
      return {400, "invalid_json"};
    case OpStatus::kInvalidArgument:
      return {400, "invalid_argument"};
    case OpStatus::kUnauthorized:
      return {401, "unauthorized"};
    case OpStatus::kNotFound:
      return {404, "not_found"};
    case OpStatus::kUnknownRoom:
      return {404, "unknown_room"};
    case OpStatus::kUnknownSession:
      return {404, "unknown_session"};
    case OpStatus::kUnknownJob:
      return {404, "unknown_job"};
    case OpStatus::kUnknownWebhook:
      return {404, "unknown_webhook"};
    case OpStatus::kUnknownSchedule:
      return {404, "unknown_schedule"};
    case OpStatus::kUnknownBatch:
      return {404, "unknown_batch"};
    case OpStatus::kUnknownBackup:
      return {404, "unknown_backup"};
    case OpStatus::kMethodNotAllowed:
      return {405, "method_not_allowed"};
    case OpStatus::kConflict:
      return {409, "conflict"};
    case OpStatus::kPayloadTooLarge:
      return {413, "payload_too_large"};
    case OpStatus::kRequestTimeout:
      return {408, "request_timeout"};
    case OpStatus::kHeaderTooLarge:
      return {431, "header_too_large"};
    case OpStatus::kRateLimited:
      return {429, "rate_limited"};
    case OpStatus::kChallengeRequired:
      return {403, "challenge_required"};
    case OpStatus::kLimitReached:
      return {507, "limit_reached"};
    case OpStatus::kUpgradeRequired:
      return {426, "upgrade_required"};
    case OpStatus::kOriginNotAllowed:
      return {403, "origin_not_allowed"};
    case OpStatus::kClientCertificateRequired:
      return {403, "client_certificate_required"};
    case OpStatus::kUnsupportedMediaType:
      return {415, "unsupported_media_type"};
    case OpStatus::kUnavailable:
      return {503, "unavailable"};
    case OpStatus::kInternal:
      return {500, "internal"};
  }
  return {500, "internal"};
}

}  // namespace anteroom
