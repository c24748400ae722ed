#include "server/openapi_doc.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "server/openapi_files.h"

namespace anteroom::server {

namespace {

namespace json = boost::json;

constexpr std::string_view kCommonFile = "common.json";
constexpr std::string_view kErrorRef = "#/components/schemas/Error";

// A route's description as a family file gives it.
struct Described {
  const json::object* route = nullptr;
  std::string tag;
  std::string file;
  bool used = false;
};

class Builder {
 public:
  Builder(std::span<const ApiDocFile> files, std::string_view version)
      : files_(files), version_(version) {}

  ApiDoc Build(std::span<const RouteInfo> routes) {
    ReadFiles();
    json::object paths;
    for (const RouteInfo& r : routes) {
      std::string method(http::to_string(r.method));
      auto it = described_.find({method, r.pattern});
      if (it == described_.end()) {
        Problem(method + " " + r.pattern +
                ": no description in src/server/openapi/*.json (every route needs one)");
        continue;
      }
      it->second.used = true;
      json::value& item = paths[r.pattern];
      if (!item.is_object()) item = json::object{};
      std::string lower = method;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      item.as_object()[lower] = Operation(r, method, it->second);
    }
    ApiDoc doc;
    for (const auto& [key, d] : described_) {
      if (!d.used) doc.unused.push_back(key.first + " " + key.second + " (" + d.file + ")");
    }
    doc.problems = std::move(problems_);
    if (!doc.problems.empty()) return doc;
    json::object root;
    root["openapi"] = "3.1.0";
    root["info"] = Info();
    root["tags"] = std::move(tags_);
    root["paths"] = std::move(paths);
    json::object components;
    components["schemas"] = std::move(schemas_);
    components["securitySchemes"] = SecuritySchemes();
    root["components"] = std::move(components);
    doc.json = json::serialize(root);
    return doc;
  }

 private:
  void Problem(std::string text) { problems_.push_back(std::move(text)); }

  // Keys of `o` outside `allowed` are problems: a typo must not silently drop a field.
  void OnlyKeys(const json::object& o, std::initializer_list<std::string_view> allowed,
                const std::string& where) {
    for (const auto& kv : o) {
      if (std::find(allowed.begin(), allowed.end(), kv.key()) == allowed.end()) {
        Problem(where + ": unknown key '" + std::string(kv.key()) + "'");
      }
    }
  }

  const json::object* ObjectAt(const json::object& o, std::string_view key,
                               const std::string& where, bool required) {
    const json::value* v = o.if_contains(key);
    if (v == nullptr) {
      if (required) Problem(where + ": '" + std::string(key) + "' is required");
      return nullptr;
    }
    if (!v->is_object()) {
      Problem(where + ": '" + std::string(key) + "' must be an object");
      return nullptr;
    }
    return &v->as_object();
  }

  void ReadFiles() {
    parsed_.reserve(files_.size());  // the routes point into them
    for (const ApiDocFile& f : files_) {
      std::string name(f.name);
      boost::system::error_code ec;
      json::value v = json::parse(f.json, ec);
      if (ec || !v.is_object()) {
        Problem(name + ": not a JSON object (" + ec.message() + ")");
        continue;
      }
      parsed_.push_back(std::move(v));
      const json::object& o = parsed_.back().as_object();
      if (f.name == kCommonFile) {
        OnlyKeys(o, {"path_params", "schemas"}, name);
        if (const json::object* p = ObjectAt(o, "path_params", name, true)) path_params_ = *p;
        if (const json::object* s = ObjectAt(o, "schemas", name, true)) AddSchemas(*s, name);
        continue;
      }
      OnlyKeys(o, {"tag", "schemas", "routes"}, name);
      std::string tag;
      if (const json::object* t = ObjectAt(o, "tag", name, true)) {
        OnlyKeys(*t, {"name", "description"}, name + " tag");
        const json::value* n = t->if_contains("name");
        if (n == nullptr || !n->is_string()) {
          Problem(name + ": the tag needs a 'name'");
        } else {
          tag = std::string(n->as_string());
          tags_.push_back(*t);
        }
      }
      if (const json::object* s = ObjectAt(o, "schemas", name, false)) AddSchemas(*s, name);
      const json::object* routes = ObjectAt(o, "routes", name, true);
      if (routes == nullptr) continue;
      for (const auto& kv : *routes) AddRoute(kv.key(), kv.value(), tag, name);
    }
    if (path_params_.empty()) Problem(std::string(kCommonFile) + ": no path_params");
    // The one error object's codes are the server's own table (common/op_status.h).
    json::array codes;
    for (int s = static_cast<int>(OpStatus::kInvalidJson);
         s <= static_cast<int>(OpStatus::kInternal); ++s) {
      std::string_view code = ToWire(static_cast<OpStatus>(s)).code;
      if (std::find(codes.begin(), codes.end(), json::value(code)) == codes.end()) {
        codes.emplace_back(code);
      }
    }
    if (json::object* error = ErrorCodeSchema()) (*error)["enum"] = std::move(codes);
  }

  json::object* ErrorCodeSchema() {
    json::value* e = schemas_.if_contains("Error");
    if (e == nullptr) {
      Problem(std::string(kCommonFile) + ": no Error schema");
      return nullptr;
    }
    json::value* code = nullptr;
    if (e->is_object()) {
      if (json::value* props = e->as_object().if_contains("properties")) {
        if (json::value* err =
                props->is_object() ? props->as_object().if_contains("error") : nullptr) {
          if (json::value* p =
                  err->is_object() ? err->as_object().if_contains("properties") : nullptr) {
            code = p->is_object() ? p->as_object().if_contains("code") : nullptr;
          }
        }
      }
    }
    if (code == nullptr || !code->is_object()) {
      Problem("the Error schema has no error.code property");
      return nullptr;
    }
    return &code->as_object();
  }

  void AddSchemas(const json::object& schemas, const std::string& file) {
    for (const auto& kv : schemas) {
      if (schemas_.contains(kv.key())) {
        Problem(file + ": schema '" + std::string(kv.key()) + "' is defined twice");
        continue;
      }
      schemas_[kv.key()] = kv.value();
    }
  }

  // "GET /path" or "GET,HEAD /path".
  void AddRoute(std::string_view key, const json::value& value, const std::string& tag,
                const std::string& file) {
    std::string where = file + " '" + std::string(key) + "'";
    size_t space = key.find(' ');
    if (space == std::string_view::npos || !value.is_object()) {
      Problem(where + ": a route is \"METHOD /pattern\": {...}");
      return;
    }
    std::string_view methods = key.substr(0, space);
    std::string pattern(key.substr(space + 1));
    const json::object& route = value.as_object();
    OnlyKeys(route,
             {"summary", "description", "query", "headers", "request", "responses", "replay"},
             where);
    while (!methods.empty()) {
      size_t comma = methods.find(',');
      std::string method(methods.substr(0, comma));
      methods = comma == std::string_view::npos ? std::string_view{} : methods.substr(comma + 1);
      auto [it, fresh] =
          described_.emplace(std::make_pair(method, pattern), Described{&route, tag, file});
      if (!fresh) Problem(where + ": " + method + " " + pattern + " is described twice");
    }
  }

  json::object Info() const {
    json::object info;
    info["title"] = "anteroom";
    info["version"] = version_;
    info["summary"] = "Waiting rooms with exact positions, and reliable at-least-once queues.";
    info["description"] =
        "Generated by the server from its route table (method, path, scope, body limit) and "
        "the descriptions in src/server/openapi/. Every error answers the one Error object "
        "and changes nothing. Keys: the admin key (ANTEROOM_ADMIN_KEY) opens every route; "
        "queue routes take the queue key (or a queue's own key) or the admin key, when one is "
        "set; with neither set, queue routes are open. Browsers of other origins may call "
        "only the public room API (x-anteroom-cors: cors_public). See docs/api.md.";
    info["license"] = json::object{{"name", "MIT"}, {"identifier", "MIT"}};
    return info;
  }

  static json::object SecuritySchemes() {
    json::object s;
    s["adminKey"] = json::object{
        {"type", "http"},
        {"scheme", "bearer"},
        {"description",
         "The admin key (ANTEROOM_ADMIN_KEY): `Authorization: Bearer KEY`, or HTTP Basic with "
         "any user name and KEY as the password. Opens every route."}};
    s["queueKey"] = json::object{
        {"type", "http"},
        {"scheme", "bearer"},
        {"description",
         "The queue key (--queue-key / ANTEROOM_QUEUE_KEY), or the key of the queue itself "
         "(PUT /v1/queues/{q}/key). Opens the queue routes only."}};
    return s;
  }

  static json::value Security(Scope scope) {
    switch (scope) {
      case Scope::kQueue:
        return json::array{json::object{{"queueKey", json::array{}}},
                           json::object{{"adminKey", json::array{}}}};
      case Scope::kAdmin:
        return json::array{json::object{{"adminKey", json::array{}}}};
      case Scope::kPublic:
      case Scope::kSession:
        break;
    }
    return json::array{};
  }

  // "post" + "Queues" + "ByQ" + "Jobs": unique per (method, pattern), readable in generated
  // clients.
  static std::string OperationId(const std::string& method, std::string_view pattern) {
    std::string id;
    for (char c : method) id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool upper = true;
    bool first_segment = true;
    size_t i = 0;
    while (i < pattern.size()) {
      size_t end = pattern.find('/', i + 1);
      std::string_view seg = pattern.substr(
          i + 1, end == std::string_view::npos ? std::string_view::npos : end - i - 1);
      i = end == std::string_view::npos ? pattern.size() : end;
      if (first_segment && seg == "v1") continue;
      first_segment = false;
      if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
        id += "By";
        seg = seg.substr(1, seg.size() - 2);
      }
      upper = true;
      for (char c : seg) {
        if (!std::isalnum(static_cast<unsigned char>(c))) {
          upper = true;
          continue;
        }
        id += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
        upper = false;
      }
    }
    return id;
  }

  static std::vector<std::string> PathParams(std::string_view pattern) {
    std::vector<std::string> out;
    size_t open = pattern.find('{');
    while (open != std::string_view::npos) {
      size_t close = pattern.find('}', open);
      if (close == std::string_view::npos) break;
      out.emplace_back(pattern.substr(open + 1, close - open - 1));
      open = pattern.find('{', close);
    }
    return out;
  }

  static std::string_view KindName(const RouteOptions& o) {
    if (o.stream) return "stream";
    if (o.parks) return "long_poll";
    return "plain";
  }

  json::object ErrorResponse(std::string description) const {
    json::object r;
    r["description"] = std::move(description);
    r["content"] = json::object{
        {"application/json", json::object{{"schema", json::object{{"$ref", kErrorRef}}}}}};
    return r;
  }

  json::object Response(const json::object& given, const std::string& where) {
    OnlyKeys(given, {"description", "schema", "example", "content_type", "headers", "error"},
             where);
    json::object r;
    const json::value* description = given.if_contains("description");
    if (description == nullptr || !description->is_string()) {
      Problem(where + ": a response needs a 'description'");
      r["description"] = "";
    } else {
      r["description"] = *description;
    }
    const json::value* error = given.if_contains("error");
    if (error != nullptr && error->is_bool() && error->as_bool()) {
      return ErrorResponse(std::string(r["description"].as_string()));
    }
    std::string type = "application/json";
    if (const json::value* ct = given.if_contains("content_type"); ct && ct->is_string()) {
      type = std::string(ct->as_string());
    }
    json::object media;
    if (const json::value* s = given.if_contains("schema")) media["schema"] = *s;
    if (const json::value* e = given.if_contains("example")) media["example"] = *e;
    if (!media.empty() || given.contains("content_type")) {
      r["content"] = json::object{{type, std::move(media)}};
    }
    if (const json::value* h = given.if_contains("headers")) r["headers"] = *h;
    return r;
  }

  // The route's query or header parameters (`in`), as its description lists them.
  void AddParameters(const json::object* given, std::string_view in, const std::string& where,
                     json::array& parameters) {
    if (given == nullptr) return;
    for (const auto& kv : *given) {
      std::string what = where + " " + std::string(in) + " " + std::string(kv.key());
      if (!kv.value().is_object()) {
        Problem(what + ": must be an object");
        continue;
      }
      OnlyKeys(kv.value().as_object(), {"description", "schema", "example", "required"}, what);
      json::object param = kv.value().as_object();
      param["name"] = kv.key();
      param["in"] = in;
      if (!param.contains("required")) param["required"] = false;
      parameters.push_back(std::move(param));
    }
  }

  json::object Operation(const RouteInfo& info, const std::string& method, const Described& d) {
    const json::object& route = *d.route;
    std::string where = d.file + " '" + method + " " + info.pattern + "'";
    json::object op;
    op["operationId"] = OperationId(method, info.pattern);
    op["tags"] = json::array{json::value(d.tag)};
    if (const json::value* s = route.if_contains("summary"); s && s->is_string()) {
      op["summary"] = *s;
    } else {
      Problem(where + ": 'summary' is required");
    }
    if (const json::value* s = route.if_contains("description")) op["description"] = *s;

    json::array parameters;
    for (const std::string& name : PathParams(info.pattern)) {
      const json::value* p = path_params_.if_contains(name);
      if (p == nullptr || !p->is_object()) {
        Problem(where + ": path parameter '" + name + "' is not in common.json's path_params");
        continue;
      }
      json::object param = p->as_object();
      param["name"] = name;
      param["in"] = "path";
      param["required"] = true;
      parameters.push_back(std::move(param));
    }
    const json::object* query = ObjectAt(route, "query", where, false);
    AddParameters(query, "query", where, parameters);
    AddParameters(ObjectAt(route, "headers", where, false), "header", where, parameters);
    if (!parameters.empty()) op["parameters"] = std::move(parameters);

    const json::object* request = ObjectAt(route, "request", where, false);
    bool reads_body = request != nullptr;
    if (request != nullptr) {
      OnlyKeys(*request, {"schema", "example", "content_type"}, where + " request");
      if (!request->contains("example")) Problem(where + ": the request needs an 'example'");
      std::string type = "application/json";
      if (const json::value* ct = request->if_contains("content_type"); ct && ct->is_string()) {
        type = std::string(ct->as_string());
      }
      json::object media;
      if (const json::value* s = request->if_contains("schema")) media["schema"] = *s;
      if (const json::value* e = request->if_contains("example")) media["example"] = *e;
      op["requestBody"] = json::object{
          {"required", true},
          {"description", "At most " + std::to_string(info.options.body_limit) + " bytes."},
          {"content", json::object{{type, std::move(media)}}}};
    }

    json::object responses;
    bool has_example = false;
    if (const json::object* given = ObjectAt(route, "responses", where, true)) {
      for (const auto& kv : *given) {
        if (!kv.value().is_object()) {
          Problem(where + ": response " + std::string(kv.key()) + " must be an object");
          continue;
        }
        if (kv.value().as_object().contains("example")) has_example = true;
        responses[kv.key()] =
            Response(kv.value().as_object(), where + " response " + std::string(kv.key()));
      }
    }
    if (!has_example) Problem(where + ": no response has an 'example'");
    // What every route of its kind may answer, unless the family said more.
    bool proxied = info.options.cors == Cors::kProxied;
    auto standard = [&](std::string_view status, std::string description) {
      if (!responses.contains(status)) responses[status] = ErrorResponse(std::move(description));
    };
    if (!proxied && (reads_body || query != nullptr || !PathParams(info.pattern).empty())) {
      standard("400", "`invalid_json` or `invalid_argument`: the request is malformed.");
    }
    if (info.options.scope == Scope::kQueue || info.options.scope == Scope::kAdmin) {
      standard("401", "`unauthorized`: the route's key is missing or wrong.");
    }
    if (reads_body) {
      standard("413", "`payload_too_large`: a body over the route's limit.");
      standard("415", "`unsupported_media_type`: a body that is not JSON.");
    }
    standard("503", "`unavailable`: overload or a lost backend; retry later.");
    op["responses"] = std::move(responses);

    json::value security = Security(info.options.scope);
    if (!security.as_array().empty()) op["security"] = std::move(security);
    op["x-anteroom-scope"] = http::ToString(info.options.scope);
    op["x-anteroom-body-limit"] = info.options.body_limit;
    op["x-anteroom-cors"] = http::ToString(info.options.cors);
    op["x-anteroom-kind"] = KindName(info.options);
    if (const json::object* replay = ObjectAt(route, "replay", where, false)) {
      OnlyKeys(*replay, {"skip", "headers", "admin"}, where + " replay");
      op["x-anteroom-replay"] = *replay;
    }
    return op;
  }

  std::span<const ApiDocFile> files_;
  std::string version_;
  std::vector<json::value> parsed_;  // the files, kept for the routes' pointers into them
  json::object path_params_;
  json::object schemas_;
  json::array tags_;
  std::map<std::pair<std::string, std::string>, Described> described_;
  std::vector<std::string> problems_;
};

}  // namespace

ApiDoc BuildOpenApi(std::span<const RouteInfo> routes, std::span<const ApiDocFile> files,
                    std::string_view version) {
  return Builder(files, version).Build(routes);
}

std::span<const ApiDocFile> EmbeddedApiDocs() {
  static const std::vector<ApiDocFile> files = [] {
    std::vector<ApiDocFile> out;
    for (const auto& f : openapi_files::kFiles) {
      ApiDocFile file{f.name, f.bytes};
      if (f.name == kCommonFile) {
        out.insert(out.begin(), file);
      } else {
        out.push_back(file);
      }
    }
    return out;
  }();
  return files;
}

}  // namespace anteroom::server
