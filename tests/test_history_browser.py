"""The HTML report in a real browser: headless Chromium renders a seeded lost write; the DOM
after scripts ran holds the highlighted witness with its explanation, and the screenshot has
the witness colour (PNG decoded with zlib: no imaging dependency)."""
import os
import shutil
import struct
import subprocess
import zlib

import pytest

from checkers.history.generate import Params, generate
from checkers.history.report_html import WITNESS, render
from checkers.history.oracle.check import check_history

CHROMIUM = "/usr/bin/chromium"


def _need_chromium() -> str:
    path = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if path is None:
        msg = "headless Chromium not found (apt-get install chromium)"
        if os.environ.get("KAFKAVERIFY_REQUIRE_ALL") == "1":
            pytest.fail(msg + "; KAFKAVERIFY_REQUIRE_ALL=1 forbids skipping")
        pytest.skip(msg)
    return path


def _chromium(path, tmp, *args):
    base = [path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp / 'profile'}"]
    return subprocess.run(base + list(args), capture_output=True, text=True, timeout=120)


def png_pixels(data: bytes):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG into (width, height, channels, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, ch = 8, b"", 0, 0, 3
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


@pytest.mark.browser
def test_report_shows_seeded_lost_write_in_chromium(tmp_path):
    path = _need_chromium()
    h = generate(Params(seed=8, ops=1200, partitions=2), {"lost-write": 0.001})
    v = check_history(h)
    lost = [a for a in v.anomalies if a.type == "lost-write"]
    assert lost
    page = tmp_path / "report.html"
    page.write_text(render(h, v, title="seeded lost write"))
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    dom = _chromium(path, tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    out = dom.stdout
    # The script ran: it rendered the anomaly list and marked the body.
    assert f'data-rendered="{min(len(v.anomalies), 12)}"' in out
    assert 'class="anomaly-link"' in out and "lost-write: " in out
    first = lost[0]
    assert f"data-witness=\"{' '.join(map(str, first.witness))}\"" in out
    assert "yet no poll ever read" in out
    for i in first.witness:
        assert f'class="witness-mark" data-op="{i}"' in out
    shot = tmp_path / "shot.png"
    r = _chromium(path, tmp_path, f"--screenshot={shot}", "--window-size=1200,900", page.as_uri())
    assert r.returncode == 0 and shot.exists() and shot.stat().st_size > 1000, r.stderr[-2000:]
    w, hgt, ch, rows = png_pixels(shot.read_bytes())
    want = bytes.fromhex(WITNESS[1:])
    hits = sum(1 for row in rows for x in range(0, w * ch, ch)
               if abs(row[x] - want[0]) < 30 and row[x + 1] < 60 and abs(row[x + 2] - want[2]) < 30)
    assert hits > 20, "no witness-highlight pixels in the screenshot"
