-- wrk script: POST /api/v1alpha1/providers with a unique name per request (registration load).
-- Usage: wrk -t2 -c64 -d10s --latency -s tests/bench/register.lua http://127.0.0.1:8080
-- With $DCM_TOKEN set, every request carries it as a bearer token (scripts/bench-auth.sh).
-- With $MAX_PER_THREAD set, each thread stops after that many answers (scripts/bench-heavy-reads.sh
-- loads an exact number of providers so).
-- With $GAPS_FILE set, each thread appends "<unix time> <ms>" there for every gap of more than 15 ms
-- between two of its answers (where the p99's outliers are: BENCHMARKS.md, issue #16, session 36).
local counter = 0
local thread_id = 0
local threads = {}

function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
  table.insert(threads, thread)
end

-- A fresh prefix per wrk invocation and thread (math.random is unseeded in wrk, so a warm-up and
-- the measured run would otherwise send the same names, and part of the run would be updates).
function init(args)
  local f = io.open("/proc/sys/kernel/random/uuid")
  prefix = "bench-" .. tid .. "-" .. f:read("*l")
  f:close()
end

local headers = {["Content-Type"] = "application/json"}
local token = os.getenv("DCM_TOKEN")
if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end

function request()
  counter = counter + 1
  local body = '{"name":"' .. prefix .. "-" .. counter ..
      '","endpoint":"http://127.0.0.1:9/api/vm","service_type":"vm"}'
  return wrk.format("POST", "/api/v1alpha1/providers", headers, body)
end

local max_per_thread = tonumber(os.getenv("MAX_PER_THREAD") or "")
local answered = 0

local gaps_file = os.getenv("GAPS_FILE")
local now, gaps, last
if gaps_file and gaps_file ~= "" then
  local ffi = require("ffi")
  ffi.cdef [[ typedef struct { long tv_sec; long tv_nsec; } dcm_timespec;
              int clock_gettime(int, dcm_timespec*); ]]
  local ts = ffi.new("dcm_timespec")
  now = function()
    ffi.C.clock_gettime(0, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
end

function response(status, headers, body)
  if status ~= 201 then
    errors = (errors or 0) + 1
  end
  if now then
    local t = now()
    if last and t - last > 0.015 then
      gaps = gaps or io.open(gaps_file, "a")
      gaps:write(string.format("%.3f %.1f\n", t, (t - last) * 1000))
      gaps:flush()
    end
    last = t
  end
  answered = answered + 1
  if max_per_thread and answered >= max_per_thread then wrk.thread:stop() end
end
