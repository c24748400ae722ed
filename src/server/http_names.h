#pragma once
// The HTTP layer's names (src/http) as the feature families write them: a handler takes a
// Request and answers a Response, its family's table registers it with the Router, and its body
// is read with the json_body readers. Declared here once, so that feature code writes them as
// its own words; the rest of src/http is named `http::...`, or declared in the one file that
// uses it (LiveStream in live_hub.h, the Prometheus writers in metrics_family.cc).

#include "http/json_body.h"
#include "http/reply.h"
#include "http/router.h"

namespace anteroom::server {

// Requests, answers and the route table (http/router.h, http/reply.h).
using http::AccessKeys;
using http::Cors;
using http::ErrorReply;
using http::Handler;
using http::HasAdminKey;
using http::JsonReply;
using http::kDefaultBodyLimit;
using http::KeyDigest;
using http::QueueAccess;
using http::QueueAccessOf;
using http::QueueKeyLookup;
using http::Request;
using http::Respond;
using http::Response;
using http::RouteInfo;
using http::RouteOptions;
using http::Router;
using http::Scope;

// What a request comes with: its client (http/client_address.h), its origin
// (http/origin_policy.h), and its body (http/json_body.h).
using http::ClientKey;
using http::OriginOfUrl;
using http::OriginPolicy;
using http::ParseObject;
using http::ReadBool;
using http::ReadInt;
using http::ReadName;
using http::ReadNullableInt;
using http::ReadString;
using http::TrustedProxies;

// The router's latency histograms, shown by GET /metrics (http/http_metrics.h).
using http::HttpMetrics;

}  // namespace anteroom::server
