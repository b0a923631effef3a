"""Read back what an offline W&B run stored: its .wandb file's records (W&B's LevelDB-style log:
a 7-byte header, then 32 KiB blocks of chunks `crc32 | length | type | data`), so tests check the
summary a user would see after `wandb sync`, not what chorus meant to send."""
from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

_HEADER = 7  # ":W&B", magic 0xBEE1, version
_BLOCK = 32 * 1024
_CHUNK = 7  # crc32 (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> list[pb.Record]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    out, pending, pos = [], b"", _HEADER
    while pos + _CHUNK <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < _CHUNK:  # a block's tail too short for a chunk header is padding
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK])
        chunk = data[pos + _CHUNK:pos + _CHUNK + length]
        pos += _CHUNK + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (_FULL, _FIRST) else pending + chunk
        if kind in (_FULL, _LAST):
            r = pb.Record()
            r.ParseFromString(pending)
            out.append(r)
    return out


def final_summary(path: Path) -> dict:
    """The run's summary as W&B computes it: each history row sets its keys, summary records override
    them, in the order they were written."""
    summary: dict = {}
    for r in records(path):
        kind = r.WhichOneof("record_type")
        items = r.history.item if kind == "history" else r.summary.update if kind == "summary" else []
        for item in items:
            key = item.key or "/".join(item.nested_key)
            if not key.startswith("_"):
                summary[key] = json.loads(item.value_json)
    return summary
