-- wrk script: heartbeat load (issue #14, tests/bench/heartbeat_bench.py).
--   MODE=register: POST /api/v1alpha1/providers?id=hb-<i> (liveness heartbeat) once per i in
--                  [0, PROVIDERS), split over the THREADS threads; each thread stops when done
--                  and writes DONE_DIR/<thread> holding its count of answers other than 201/200
--                  (wrk itself runs for its whole duration).
--   MODE=beat:     POST /api/v1alpha1/providers/hb-<i>/heartbeat, round robin over PROVIDERS,
--                  each connection waiting DELAY_MS between an answer and its next beat (pacing).
-- Usage: MODE=beat PROVIDERS=20000 THREADS=2 DELAY_MS=10 \
--          wrk -t2 -c50 -d60s --latency -s tests/bench/heartbeat.lua http://127.0.0.1:8080
local started = 0
function setup(thread)
  started = started + 1
  thread:set("tid", started)  -- a global of that thread's own Lua state
end

local mode = os.getenv("MODE") or "beat"
local providers = tonumber(os.getenv("PROVIDERS") or "20000")
local threads = tonumber(os.getenv("THREADS") or "1")
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")
local headers = {["Content-Type"] = "application/json"}
local next_index, quota, answered, failed = 0, 0, 0, 0

function init(args)
  next_index = tid - 1
  quota = math.floor((providers - next_index + threads - 1) / threads)
end

function request()
  local i = next_index
  next_index = next_index + threads
  if mode == "register" then
    if i >= providers then i = tid - 1 end  -- done: an idempotent re-registration until stopped
    local body = '{"name":"hb-' .. i .. '","endpoint":"http://127.0.0.1:9/hb",' ..
        '"service_type":"vm","liveness":"heartbeat"}'
    return wrk.format("POST", "/api/v1alpha1/providers?id=hb-" .. i, headers, body)
  end
  if next_index >= providers then next_index = tid - 1 end
  return wrk.format("POST", "/api/v1alpha1/providers/hb-" .. i .. "/heartbeat", headers, "")
end

function delay()
  return delay_ms
end

function response(status, headers, body)
  answered = answered + 1
  if mode ~= "register" then return end  -- wrk counts the beats' answers that are not 2xx
  if status ~= 201 and status ~= 200 then failed = failed + 1 end
  if answered == quota then
    local marker = io.open(os.getenv("DONE_DIR") .. "/" .. tid, "w")
    marker:write(tostring(failed))
    marker:close()
    wrk.thread:stop()
  end
end
