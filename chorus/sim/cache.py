"""Content-addressed result cache: same task, testbench and simulator settings -> same result.

Entries carry an HMAC keyed by a secret in the cache root, which no jailed build or run can
read or write, so an entry that was forged or edited outside chorus is ignored, not trusted.
A cache root chorus cannot write is reported once and replaced by a private temporary one.
"""
from __future__ import annotations

import atexit
import functools
import hashlib
import hmac
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .result import SimResult

_KEY_FILE = "hmac.key"


def default_cache_root(cfg_dir: str | None = None) -> Path:
    if cfg_dir:
        root = Path(cfg_dir).expanduser()
    elif os.environ.get("CHORUS_CACHE_DIR"):
        root = Path(os.environ["CHORUS_CACHE_DIR"]).expanduser()
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chorus"
    return usable_root(str(root))


@functools.lru_cache(maxsize=8)
def usable_root(root: str) -> Path:
    """`root` when chorus can write there; otherwise a private temporary root, said once."""
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=root, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
        return Path(root)
    except OSError as exc:
        tmp = Path(tempfile.mkdtemp(prefix="chorus-cache-"))
        atexit.register(shutil.rmtree, tmp, True)
        print(f"chorus: warning: cache dir {root} is not writable ({exc.strerror}); running uncached "
              f"in {tmp} (set simulator.cache_dir or CHORUS_CACHE_DIR to a writable dir)", file=sys.stderr)
        return tmp


@functools.lru_cache(maxsize=8)
def _secret(root: str) -> bytes:
    path = Path(root) / _KEY_FILE
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".key-")  # mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        try:
            os.link(tmp, path)  # atomic and exclusive: concurrent workers all end up with one key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_bytes()


def result_key(design_files: dict[str, str], defines: dict[str, str], top: str, instance: str,
               testbench: str, tb_name: str, sim_fingerprint: str, toolchain_version: str) -> str:
    h = hashlib.sha256()
    payload = {"files": sorted(design_files.items()), "defines": sorted(defines.items()), "top": top,
               "instance": instance, "tb": testbench, "tb_name": tb_name, "sim": sim_fingerprint,
               "verilator": toolchain_version, "schema": 2}
    h.update(json.dumps(payload, sort_keys=True).encode())
    return h.hexdigest()


class ResultCache:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.dir = self.root / "results"

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def _mac(self, key: str, body: str) -> str:
        return hmac.new(_secret(str(self.root)), key.encode() + b"\0" + body.encode(), hashlib.sha256).hexdigest()

    def get(self, key: str) -> SimResult | None:
        try:
            entry = json.loads(self._path(key).read_text())
            body, mac = entry["result"], entry["mac"]
            if not hmac.compare_digest(mac, self._mac(key, body)):
                return None  # forged or damaged: recompute rather than trust it
            r = SimResult.from_dict(json.loads(body))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        r.cached = True
        return r

    def put(self, key: str, result: SimResult) -> None:
        p = self._path(key)
        body = json.dumps(result.to_dict())
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"result": body, "mac": self._mac(key, body)}, f)
            os.replace(tmp, p)  # atomic: concurrent workers never read half a file
        except OSError:
            pass  # a full or read-only disk costs speed, never the result
