"""A driver as the nemesis's producer (the interface of kafkaverify/nemesis/workload.Producer:
settings, send with a completion callback, close), and a driver asked whether its client
accepts a setting (the audit's refusals, in the client's own words)."""
from __future__ import annotations

from pathlib import Path

from kafkaverify.drivers.process import Driver, DriverError, DriverRefused

REFUSAL_BOOTSTRAP = "127.0.0.1:1"     # a probe never dials: the configuration alone is checked


def audit_settings(w: dict) -> dict:
    """The protocol's producer settings from a nemesis workload."""
    return {"acks": str(w["acks"]), "retries": w["retries"], "max_in_flight": w["max_in_flight"],
            "idempotence": bool(w["idempotence"])}


class DriverProducer:
    """One producer process of the history, in a driver process."""

    def __init__(self, client: str, bootstrap: str, w: dict, log: Path | None = None,
                 request_timeout_ms: int = 4000):
        self.client = client
        self.driver = Driver(client, log=log)
        try:
            self.effective = self.driver.configure("producer", bootstrap,
                                                   {**audit_settings(w), "request_timeout_ms": request_timeout_ms})
        except BaseException:
            self.driver.close(5)
            raise

    def settings(self, w: dict) -> dict:
        return {"acks": str(w["acks"]), "idempotence": w["idempotence"], "retries": w["retries"],
                "max_in_flight": w["max_in_flight"]}

    def send(self, topic: str, partition: int, value: bytes, on_done) -> None:
        def answered(msg: dict) -> None:
            if msg.get("type") == "ok":
                on_done(msg["offset"], None)
            elif msg.get("type") == "protocol-error":
                on_done(None, f"protocol-error: {msg.get('error')}", definite=False)
            else:
                on_done(None, str(msg.get("error")), definite=bool(msg.get("definite")))
        self.driver.submit("send", answered, topic=topic, partition=partition, key=None, value=value.decode())

    def close(self, timeout_s: float = 30) -> None:
        """Waits up to timeout_s for unanswered sends (flush), then closes; those still open stay
        unknown (the driver's death answers them as errors, recorded info)."""
        try:
            self.driver.request("flush", timeout_s + 5, timeout_ms=int(timeout_s * 1000))
        except DriverError:
            pass
        self.driver.close(10)


def refusal(client: str, s) -> str | None:
    """Why the driver's client will not run audit setting `s`, in its own words, or None."""
    d = Driver(client)
    try:
        d.configure("producer", REFUSAL_BOOTSTRAP, {"acks": s.acks, "retries": s.retries,
                                                    "max_in_flight": s.max_in_flight,
                                                    "idempotence": s.idempotence}, probe=True)
    except DriverRefused as e:
        return f"refused: {e}"
    finally:
        d.close(5)
    return None
