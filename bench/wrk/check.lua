-- wrk script: check-ins on a room whose sessions were pre-joined by `anteroom bench rooms`
-- (session ids bench-0 .. bench-(N-1)).
--
--   wrk -t1 -c64 -d10s --latency -s bench/wrk/check.lua http://127.0.0.1:PORT -- [N] [ROOM]
--
-- N defaults to 10000 and ROOM to "bench". Every request is
--   POST /v1/rooms/ROOM/check  {"session":"bench-<n>"}
-- with n cycling over 0 .. N-1 (each wrk thread starts at a different offset). done() prints
-- one JSON line: requests/s, p50/p99/max latency in ms, errors (socket errors and non-2xx).

local sessions = 10000
local room = "bench"
local next_n = 0
local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

function init(args)
  if args[1] then sessions = tonumber(args[1]) end
  if args[2] then room = args[2] end
  -- Spread the threads over the sessions so they do not check the same ones in lockstep.
  next_n = ((thread_index or 0) * 7919) % sessions
  wrk.method = "POST"
  wrk.path = "/v1/rooms/" .. room .. "/check"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = '{"session":"bench-' .. next_n .. '"}'
  next_n = next_n + 1
  if next_n >= sessions then next_n = 0 end
  return wrk.format(nil, nil, nil, body)
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
