-- wrk script: gated requests, as a proxy's forward-auth hook sends them, each with the admission
-- cookie of one of N admitted visitors (one cookie per line in COOKIES, "name=token").
--
--   wrk -t1 -c50 -d10s --latency -s bench/wrk/gate.lua URL -- COOKIES [PATH]
--
-- PATH defaults to /v1/gate/bench. Against nginx (URL of a gated location), PATH is the page
-- and the cookie reaches the gate through auth_request. done() prints one JSON line like
-- check.lua's.

local cookies = {}
local next_n = 1
local path = "/v1/gate/bench"
local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then table.insert(cookies, line) end
  end
  if args[2] then path = args[2] end
  next_n = ((thread_index or 0) * 7919) % #cookies + 1
  wrk.method = "GET"
  wrk.headers["X-Forwarded-Proto"] = "http"
  wrk.headers["X-Forwarded-Host"] = "shop.example"
  wrk.headers["X-Forwarded-Uri"] = "/product/42?x=1"
end

function request()
  local cookie = cookies[next_n]
  next_n = next_n + 1
  if next_n > #cookies then next_n = 1 end
  return wrk.format(nil, path, {["Cookie"] = cookie})
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout + e.status
  io.write(string.format(
    '{"tool":"wrk","requests":%d,"requests_per_s":%.0f,"p50_ms":%.3f,"p90_ms":%.3f,' ..
    '"p99_ms":%.3f,"max_ms":%.3f,"errors":%d,"non_2xx":%d,"duration_s":%.2f}\n',
    summary.requests, summary.requests / secs, latency:percentile(50) / 1000,
    latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    errors, e.status, secs))
end
