"""Content-addressed result cache: same task, testbench and simulator settings -> same result."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .result import SimResult


def default_cache_root(cfg_dir: str | None = None) -> Path:
    if cfg_dir:
        return Path(cfg_dir).expanduser()
    env = os.environ.get("CHORUS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chorus"


def result_key(design_files: dict[str, str], defines: dict[str, str], top: str, instance: str,
               testbench: str, tb_name: str, sim_fingerprint: str, toolchain_version: str) -> str:
    h = hashlib.sha256()
    payload = {"files": sorted(design_files.items()), "defines": sorted(defines.items()), "top": top,
               "instance": instance, "tb": testbench, "tb_name": tb_name, "sim": sim_fingerprint,
               "verilator": toolchain_version, "schema": 1}
    h.update(json.dumps(payload, sort_keys=True).encode())
    return h.hexdigest()


class ResultCache:
    def __init__(self, root: Path):
        self.dir = Path(root) / "results"

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> SimResult | None:
        p = self._path(key)
        try:
            data = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        r = SimResult.from_dict(data)
        r.cached = True
        return r

    def put(self, key: str, result: SimResult) -> None:
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(result.to_dict(), f)
        os.replace(tmp, p)  # atomic: concurrent workers never read half a file
