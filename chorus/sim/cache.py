"""Content-addressed result cache: same task, testbench and simulator settings -> same result.

Entries carry an HMAC keyed by a secret in the cache root, which no jailed build or run can
read or write, so an entry that was forged or edited outside chorus is ignored, not trusted.
A cache root chorus cannot write is reported once and replaced by a private temporary one.

Results are capped at `simulator.cache_max_gb` (1 GB = 1e9 bytes of entry files): a write that
would pass the cap first evicts the entries used longest ago (a hit touches its entry's mtime;
atime is unreliable under relatime/noatime). Each process tallies its own writes and rescans the
directory only when they could cross the cap, so parallel workers can overshoot it by at most
about their number times 1 % of the cap between rescans.
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


# per process and cache dir: (bytes on disk at the last scan + this process's writes since, budget
# left before the next scan)
_TALLY: dict[str, list[int]] = {}


class ResultCache:
    def __init__(self, root: Path, max_gb: float | None = None):
        self.root = Path(root)
        self.dir = self.root / "results"
        self.max_bytes = None if max_gb is None else int(max_gb * 1e9)

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
        try:
            os.utime(self._path(key))  # the LRU clock: a hit keeps its entry
        except OSError:
            pass
        return r

    def put(self, key: str, result: SimResult) -> None:
        p = self._path(key)
        body = json.dumps(result.to_dict())
        text = json.dumps({"result": body, "mac": self._mac(key, body)})
        try:
            if self.max_bytes is not None and not self._make_room(len(text.encode())):
                return  # larger than the whole cap: not cached
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, p)  # atomic: concurrent workers never read half a file
        except OSError:
            pass  # a full or read-only disk costs speed, never the result

    def entries(self) -> list[tuple[float, int, Path]]:
        """(last use, bytes, path) of every entry, oldest use first."""
        out = []
        for sub in (os.scandir(self.dir) if self.dir.is_dir() else ()):
            if sub.is_dir():
                for e in os.scandir(sub.path):
                    if e.name.endswith(".json"):
                        try:
                            st = e.stat()
                        except OSError:  # evicted by another worker meanwhile
                            continue
                        out.append((st.st_mtime, st.st_size, Path(e.path)))
        return sorted(out)

    def _make_room(self, size: int) -> bool:
        """Evict least recently used entries until `size` more bytes fit under the cap."""
        cap = self.max_bytes
        if size > cap:
            return False
        tally = _TALLY.get(str(self.dir))
        if tally is None or size > tally[1]:
            entries = self.entries()
            total = sum(e[1] for e in entries)
            for _, n, path in entries:
                if total + size <= cap:
                    break
                try:
                    path.unlink()
                except OSError:
                    pass
                total -= n
            # rescan once this process alone could have filled what is left, or written 1 % of the cap
            tally = _TALLY[str(self.dir)] = [total, min(cap - total, max(1, cap // 100))]
        tally[0] += size
        tally[1] -= size
        return True
