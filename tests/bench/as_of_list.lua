-- wrk script: GET /api/v1alpha1/providers?as_of=$AS_OF&max_page_size=100 (a heavy read: the
-- fold of every provider's events up to AS_OF). scripts/bench-heavy-reads.sh floods with it.
-- Usage: AS_OF=2026-11-26T07:00:00.000Z wrk -t2 -c16 -d20s -s tests/bench/as_of_list.lua URL
local path = "/api/v1alpha1/providers?max_page_size=100&as_of=" .. os.getenv("AS_OF")
local headers = nil
local token = os.getenv("DCM_TOKEN")
if token and token ~= "" then headers = {["Authorization"] = "Bearer " .. token} end

function request()
  return wrk.format("GET", path, headers)
end
