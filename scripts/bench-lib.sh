# Shared by the bench scripts (source it; it needs $URL, the serving instance's base URL).

# Waits until `dcm serve` answers /readyz and its registrar owns the requests partition (the
# first group join takes ~3 s on the mock).
wait_ready() {
  for _ in $(seq 1 200); do curl -sf "$URL/readyz" >/dev/null && break; sleep 0.1; done
  for _ in $(seq 1 200); do
    curl -s "$URL/admin/info" | grep -q '"registrar_owner":true' && break
    sleep 0.1
  done
}
