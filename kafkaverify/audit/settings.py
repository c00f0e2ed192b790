"""The audit's matrix: producer settings (acks, retries, max in flight, idempotence), which of
them Kafka promises what (spec/rules.py owns the promises), and whether a client accepts a
setting at all — asked of the client itself, so a refusal is reported in the client's own words.
"""
from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from kafkaverify.drivers.registry import DRIVERS, is_driver
from spec import rules

QUESTIONS = ("reorder", "duplicate", "loss")
CLIENTS = ("confluent", "aiokafka", "kafka-python", "kafkajs", "librdkafka", "sarama")
# the nemesis workload's client name; the last three are driver processes (kafkaverify/drivers)
CLIENT_PACKAGES = {"confluent": "confluent-kafka", "aiokafka": "aiokafka", "kafka-python": "kafka-python",
                   "kafkajs": "kafkajs", "librdkafka": "librdkafka", "sarama": "sarama"}
CLIENT_MODULES = {"confluent": "confluent_kafka", "aiokafka": "aiokafka", "kafka-python": "kafka"}


def client_missing(client: str) -> str | None:
    """Why `client` cannot run here (not installed, driver not built), or None."""
    if is_driver(client):
        return DRIVERS[client].missing()
    try:
        __import__(CLIENT_MODULES[client])
    except ImportError:
        return f"client {client} is not installed (pip install {CLIENT_PACKAGES[client]})"
    return None


@dataclass(frozen=True, order=True)
class Setting:
    acks: str              # "1" or "all"
    retries: int
    max_in_flight: int
    idempotence: bool

    @property
    def key(self) -> str:
        """A file-name-safe id, e.g. acks-all_r5_m2_idem-on."""
        return f"acks-{self.acks}_r{self.retries}_m{self.max_in_flight}_idem-{'on' if self.idempotence else 'off'}"

    def label(self) -> str:
        return (f"acks={self.acks} retries={self.retries} max.in.flight={self.max_in_flight} "
                f"idempotence={'on' if self.idempotence else 'off'}")

    def promises(self) -> dict[str, str | None]:
        """Per question: None when Kafka's documentation promises it cannot happen (then an
        occurrence breaks a promise), else why it may."""
        fixes = frozenset({"idempotent-producer"}) if self.idempotence else frozenset()
        loss = rules.promises_acked_durable(self.acks)
        return {"reorder": rules.promises_send_order(fixes, self.max_in_flight, self.retries),
                "duplicate": rules.promises_exactly_once(fixes, self.retries),
                "loss": None if self.acks == "all" else loss}


def parse_list(text: str, option: str, conv, allowed=None) -> tuple:
    """'1,all' -> ('1', 'all'): sorted, unique; ValueError names the option and the bad item."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            v = conv(item)
        except (ValueError, TypeError):
            raise ValueError(f"{option}: bad value {item!r}") from None
        if allowed is not None and v not in allowed:
            raise ValueError(f"{option}: {item!r} is not one of {', '.join(map(str, allowed))}")
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError(f"{option}: no values")
    return tuple(out)


def matrix(acks: tuple, retries: tuple, max_in_flight: tuple, idempotence: tuple) -> list[Setting]:
    return sorted(Setting(a, r, m, i) for a, r, m, i in itertools.product(acks, retries, max_in_flight, idempotence))


def client_refusal(client: str, s: Setting) -> str | None:
    """Why `client` will not run setting `s`, in the client's own words (its constructor's
    error), or None when it accepts it. The constructors validate their configuration before
    connecting; the bootstrap address is never dialled (a closed local port). A driver is asked
    with a probing configure (docs/drivers.md)."""
    if is_driver(client):
        from kafkaverify.drivers.producer import refusal     # lazy: starts the driver process
        return refusal(client, s)
    if client == "aiokafka":
        # aiokafka has neither knob: one request in flight per partition, retries until
        # request_timeout_ms; a setting asking otherwise cannot be configured
        if s.max_in_flight != 1:
            return "unsupported: aiokafka has no max.in.flight option (one request in flight per partition)"
        if s.retries == 0:
            return "unsupported: aiokafka has no retries option (it retries until request_timeout_ms)"
        # lazy: each client library is optional and loaded only when its setting is probed
        from aiokafka import AIOKafkaProducer

        async def make():
            p = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", acks="all" if s.acks == "all" else int(s.acks),
                                 enable_idempotence=s.idempotence)
            await p.stop()            # never started: closes its client without connecting
        try:
            asyncio.run(make())
        except Exception as e:        # the client's own refusal, whatever its class
            return f"refused: {type(e).__name__}: {e}"
        return None
    if client == "kafka-python":
        from kafka import KafkaProducer     # lazy: an optional client library
        try:
            p = KafkaProducer(bootstrap_servers="127.0.0.1:1", acks="all" if s.acks == "all" else int(s.acks),
                              retries=s.retries, enable_idempotence=s.idempotence,
                              max_in_flight_requests_per_connection=s.max_in_flight,
                              api_version=(2, 5))     # no version probe: only the configuration is checked
        except Exception as e:
            return f"refused: {type(e).__name__}: {e}"
        p.close(0)
        return None
    if client == "confluent":
        from confluent_kafka import Producer     # lazy: an optional client library
        try:
            Producer({"bootstrap.servers": "127.0.0.1:1", "acks": s.acks, "retries": s.retries,
                      "enable.idempotence": s.idempotence, "log_level": 0,
                      "max.in.flight.requests.per.connection": s.max_in_flight})
        except Exception as e:
            return f"refused: {type(e).__name__}: {e}"
        return None
    raise ValueError(f"unknown client {client!r}")
