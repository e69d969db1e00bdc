-- wrk script: GET /api/v1alpha1/providers/{id} over ids listed in $IDS_FILE (one per line).
-- Usage: IDS_FILE=/tmp/ids wrk -t1 -c64 -d10s --latency -s tests/bench/get_by_id.lua URL
-- With $DCM_TOKEN set, every request carries it as a bearer token (scripts/bench-auth.sh).
local ids = {}
for line in io.lines(os.getenv("IDS_FILE")) do ids[#ids + 1] = line end
local i = 0
local headers = nil
local token = os.getenv("DCM_TOKEN")
if token and token ~= "" then headers = {["Authorization"] = "Bearer " .. token} end

function request()
  i = i % #ids + 1
  return wrk.format("GET", "/api/v1alpha1/providers/" .. ids[i], headers)
end
