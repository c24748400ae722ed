-- wrk script: the worker loop with the ack riding on the next fetch (one request per job), on a
-- queue filled beforehand.
--
--   wrk -t1 -c4 -d10s --latency -s bench/wrk/worker_loop.lua URL -- [QUEUE]
--
-- Every request is POST /v1/queues/QUEUE/fetch {"worker":"wrk","max":1,"wait_ms":1000,
-- "lease_ms":30000,"ack":[LEASE]}, LEASE the lease of a job an earlier answer of this thread
-- handed out (none on the first requests). done() prints the line check.lua prints.

local queue = "bench"
local leases = {}

function init(args)
  if args[1] then queue = args[1] end
  wrk.method = "POST"
  wrk.path = "/v1/queues/" .. queue .. "/fetch"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local lease = table.remove(leases)
  local ack = lease and (',"ack":["' .. lease .. '"]') or ""
  return wrk.format(nil, nil, nil,
    '{"worker":"wrk","max":1,"wait_ms":1000,"lease_ms":30000' .. ack .. '}')
end

function response(status, headers, body)
  local lease = body:match('"lease":"([^"]+)"')
  if lease then table.insert(leases, lease) end
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
