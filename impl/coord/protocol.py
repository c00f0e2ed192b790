"""Wire format of the embedded coordination server: length-prefixed JSON frames over TCP.

Owns: framing (4-byte big-endian length, then a UTF-8 JSON object), the frame bound, and the
bytes<->text encoding of node data. Shared by `server.py` (asyncio) and `embedded.py` (blocking
sockets), so both sides agree by construction.

Messages (client -> server), each with an int "id" unique within the connection:
  {"op": "hello", "timeout_ms": int}          first frame; opens a session
  {"op": "hello", "timeout_ms", "session_id", "password"}   resumes one after a dropped connection
  {"op": "ping"} | {"op": "close"}
  {"op": "create", "path", "data", "ephemeral": bool, "makepath": bool}
  {"op": "get"|"exists"|"children", "path"}
  {"op": "set", "path", "data", "version"} | {"op": "delete", "path", "version"}
  {"op": "watch_data"|"watch_children", "path"}   the request id becomes the watch id
Server -> client:
  {"id", "ok": {...}} | {"id", "err": ErrorName, "msg": str}    one reply per request, in order
      (hello's ok: {"session_id", "timeout_ms" as negotiated, "password"})
  {"watch": id, "data", "version", "mzxid"} | {"watch": id, "children": [...]}
      pushed after a change; after a resume once per watch with "resync": true
  {"expired": reason}                          the session is gone; the server then closes
"""
from __future__ import annotations

import base64
import json
import struct

# Largest frame either side accepts: room for MAX_DATA_BYTES of data in base64 plus the envelope.
# A frame announcing more is treated as garbage: the reader closes that connection.
MAX_FRAME_BYTES = 2 * 1024 * 1024
HEADER = struct.Struct(">I")

# Error names on the wire; embedded.py maps them to the exception classes of base.py.
ERRORS = ("NodeExists", "NoNode", "BadVersion", "NotEmpty", "SessionExpired", "BadArguments")


class FrameError(Exception):
    """The peer sent something that is not a valid frame; drop the connection."""


def encode_frame(msg: dict) -> bytes:
    body = json.dumps(msg, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    (n,) = HEADER.unpack(header)
    if n > MAX_FRAME_BYTES:
        raise FrameError(f"frame announces {n} bytes, above the {MAX_FRAME_BYTES}-byte bound")
    return n


def decode_body(body: bytes) -> dict:
    try:
        msg = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"frame is not UTF-8 JSON: {e}") from None
    if not isinstance(msg, dict):
        raise FrameError("frame is not a JSON object")
    return msg


def b2s(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def s2b(text: object) -> bytes:
    if not isinstance(text, str):
        raise FrameError("data must be a base64 string")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise FrameError(f"data is not base64: {e}") from None
