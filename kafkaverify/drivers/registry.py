"""The drivers kafkaverify knows: where each lives under the repository's `drivers/` folder, how
it is started, whether the set-up built it, and its client's producer defaults (read from the
client's sources at the version the set-up installs: kafkajs 2.2.4's producer/index.js and
network/requestQueue, librdkafka 2.0.2's CONFIGURATION.md, sarama 1.22.1's config.go)."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

INT32_MAX = 2147483647
JS_MAX_SAFE_INTEGER = 9007199254740991
UNLIMITED_IN_FLIGHT = 1_000_000       # "no limit", as the in-process confluent-kafka default is recorded


def drivers_dir() -> Path:
    """The repository's drivers/ folder (KAFKAVERIFY_DRIVERS overrides it)."""
    env = os.environ.get("KAFKAVERIFY_DRIVERS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "drivers"


@dataclass(frozen=True)
class DriverSpec:
    name: str              # the name --clients takes
    language: str
    folder: str            # under drivers/
    program: tuple[str, ...]   # the command, paths relative to the driver's folder
    built_by: str          # the file whose presence says the set-up built it
    how_to_build: str
    defaults_idem_off: tuple[bool, int, int]     # idempotence, retries, max in flight
    max_in_flight_idem: int | None = None        # the client's in-flight default when idempotence is on

    def command(self) -> list[str]:
        """The program's words, those naming a file of the driver's folder made absolute."""
        d = drivers_dir() / self.folder
        return [str(d / a) if (d / a).exists() else a for a in self.program]

    def missing(self) -> str | None:
        """Why this driver cannot run here, or None."""
        if not (drivers_dir() / self.folder / self.built_by).exists():
            return f"driver {self.name} is not built ({self.how_to_build})"
        exe = self.command()[0]
        if shutil.which(exe) is None:
            return f"driver {self.name} needs {exe!r}, which is not on PATH"
        return None

    def defaults(self, idempotence: bool | None) -> dict:
        idem, retries, mif = self.defaults_idem_off
        if self.name == "kafkajs" and idempotence:
            retries = JS_MAX_SAFE_INTEGER       # producer/index.js: retries default to MAX_SAFE_INTEGER
        if idempotence and self.max_in_flight_idem is not None:
            mif = self.max_in_flight_idem
        return {"idempotence": idem, "retries": min(retries, INT32_MAX), "max_in_flight": mif}


DRIVERS: dict[str, DriverSpec] = {
    "kafkajs": DriverSpec("kafkajs", "node", "kafkajs", ("node", "driver.js"), "node_modules/kafkajs/package.json",
                          "make setup runs npm ci in drivers/kafkajs", (False, 5, UNLIMITED_IN_FLIGHT)),
    "librdkafka": DriverSpec("librdkafka", "c", "librdkafka", ("kv-librdkafka",), "kv-librdkafka",
                             "make setup builds it; it needs Debian's librdkafka-dev and libjansson-dev",
                             (False, INT32_MAX, UNLIMITED_IN_FLIGHT), max_in_flight_idem=5),
    "sarama": DriverSpec("sarama", "go", "sarama", ("kv-sarama",), "kv-sarama",
                         "make setup builds it; it needs Debian's golang-go and golang-github-shopify-sarama-dev",
                         (False, 3, 5)),
}


def is_driver(client: str) -> bool:
    return client in DRIVERS
