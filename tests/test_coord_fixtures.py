"""The shared fixtures' own promises: a missing ZooKeeper never skips silently under CI
(KAFKAVERIFY_REQUIRE_ALL=1 turns the skip into a failure with the install hint), and the
embedded server fixture hands out a live, isolated server."""
from __future__ import annotations

import subprocess
import sys

import pytest

from impl import coord
from tests.conftest import subprocess_env

pytestmark = pytest.mark.timeout(60)

USES_ZOOKEEPER = "def test_needs_zk(zookeeper_url):\n    pass\n"


def _run_pytest(tmp_path, **env_overrides) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_zk.py").write_text(USES_ZOOKEEPER)
    env = subprocess_env()
    env.pop("KAFKAVERIFY_REQUIRE_ALL", None)
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-q", "-rs", "--rootdir", str(tmp_path), str(tmp_path / "test_needs_zk.py")],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)


def test_missing_zookeeper_fails_under_require_all(tmp_path):
    r = _run_pytest(tmp_path, KAFKAVERIFY_ZK_JAR="/nonexistent/zookeeper.jar",
                    KAFKAVERIFY_REQUIRE_ALL="1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "apt-get install zookeeper" in r.stdout and "1 error" in r.stdout, r.stdout


def test_missing_zookeeper_skips_with_the_reason_otherwise(tmp_path):
    r = _run_pytest(tmp_path, KAFKAVERIFY_ZK_JAR="/nonexistent/zookeeper.jar")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout and "apt-get install zookeeper" in r.stdout, r.stdout


def test_embedded_server_starts_empty_and_writes_into_its_data_dir(embedded_coord_server, tmp_path):
    log = tmp_path / "coord" / "coord.0.log"
    assert embedded_coord_server.data_dir == str(tmp_path / "coord")
    with coord.connect(embedded_coord_server.url, session_timeout_ms=1000) as c:
        assert c.get_children("/") == []
        before = log.stat().st_size
        c.create("/brokers/ids", b"")
    assert log.stat().st_size > before  # acknowledged means written to this test's journal

