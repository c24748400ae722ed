#pragma once
// The OpenAPI 3.1 document of the server (`GET /openapi.json`), built from the router's own
// table of routes and one JSON file per family (src/server/openapi/*.json, embedded at build
// time), so the document cannot drift from the code: a route without a description, or a
// description without a route, is an error (tests/unit/openapi_doc_test.cc holds every family
// to it).
//
// What comes from the route table, per route: the method and path; the path parameters (from
// the pattern's `{name}`s, described once in common.json's `path_params`); the scope, as the
// operation's `security` (public and session: none; queue: the queue key or the admin key;
// admin: the admin key) and `x-anteroom-scope`; the body limit (`x-anteroom-body-limit`);
// CORS and kind (`x-anteroom-cors`, `x-anteroom-kind`); the error answers every route of its
// kind can give (400, 401, 413, 415, 503), each the one Error object whose `code` enum comes
// from the server's table of wire errors (common/op_status.h).
//
// What a family file says (keys other than these are errors, so a typo cannot hide):
//
//   {"tag": {"name", "description"},
//    "schemas": {NAME: JSON Schema, ...},        // into components.schemas
//    "routes": {"METHOD /pattern": {
//        "summary": text, "description"?: text,
//        "query"?: {NAME: {"description", "schema", "example"?, "required"?: bool}},
//        "headers"?: {NAME: {...the same}},                    // request headers it reads
//        "request"?: {"schema", "example", "content_type"?},   // default application/json
//        "responses": {STATUS: {"description", "schema"?, "example"?, "content_type"?,
//                               "headers"?: {NAME: {"description", "schema"}},
//                               "error"?: true}},              // the Error object
//        "replay"?: {"skip": why} | {"headers": {NAME: value}, "admin": bool}}}}
//
// common.json holds the shared schemas and `path_params`. Every route has an example: its
// request's (when it takes a body) and its responses'; `replay` tells the test that replays
// the examples against the real server (tests/openapi/) what the request needs, or why it
// cannot be replayed (a WebSocket upgrade).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_names.h"

namespace anteroom::server {

// One family's description: its file name (for messages) and its JSON text.
struct ApiDocFile {
  std::string_view name;
  std::string_view json;
};

struct ApiDoc {
  std::string json;  // the document; empty when there are problems
  // What makes the document wrong, one line each: a route no file describes, a bad key, an
  // unknown path parameter, a route without an example.
  std::vector<std::string> problems;
  // Descriptions of routes `routes` did not have: stale in a server with every family (the
  // test's), expected in one without some (no gate, no live channel).
  std::vector<std::string> unused;
};

// The document for `routes`, in their order.
ApiDoc BuildOpenApi(std::span<const RouteInfo> routes, std::span<const ApiDocFile> files,
                    std::string_view version);

// The embedded files (src/server/openapi/*.json), common.json first.
std::span<const ApiDocFile> EmbeddedApiDocs();

}  // namespace anteroom::server
