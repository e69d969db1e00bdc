"""Parses compose.yaml (Docker cannot run here) and checks it names a Kafka, two control-plane
instances on one cluster, and the simulated SPs."""
import sys

import yaml

with open(sys.argv[1]) as f:
    doc = yaml.safe_load(f)
services = doc["services"]
for name in ("kafka", "dcm-1", "dcm-2", "sp-sim"):
    assert name in services, f"compose.yaml lacks service {name}"
for name in ("dcm-1", "dcm-2"):
    svc = services[name]
    assert svc["environment"]["KAFKA_BROKERS"] == "kafka:9092", name
    assert svc["command"][:2] == ["dcm", "serve"], name
    env = svc["environment"]
    # SPEC §6: serve refuses to start without an auth configuration or an explicit opt-out.
    assert env.get("AUTH_DISABLED") == "true" or env.get("AUTH_JWKS_FILE") or \
        env.get("AUTH_ISSUER_URL"), f"{name} has no auth configuration"
assert services["sp-sim"]["command"][:2] == ["dcm", "sp-sim"]
print("compose.yaml: ok,", len(services), "services")
