"""The result cache's size cap: least recently used entries go first, a hit counts as a use."""
import os

from chorus.sim import SimConfig, SimResult
from chorus.sim.cache import ResultCache

KEYS = [c * 64 for c in "abcd"]  # equal-length keys and one result: every entry has the same size


def _cache(root, max_gb=None):
    root.mkdir()  # as default_cache_root's usable_root does
    return ResultCache(root, max_gb)


def _put(cache, key):
    """Put one result under a new `key`; the file of the entry the put added, None where it added none."""
    before = {path for _, _, path in cache.entries()}
    cache.put(key, SimResult("rejected", "same reason"))
    added = {path for _, _, path in cache.entries()} - before
    assert len(added) <= 1
    return added.pop() if added else None


def test_a_write_past_the_cap_evicts_the_entry_used_longest_ago(tmp_path):
    size = _put(_cache(tmp_path / "probe"), KEYS[0]).stat().st_size
    cache = _cache(tmp_path / "c", 2.5 * size / 1e9)  # room for two entries, not three
    a, b = _put(cache, KEYS[0]), _put(cache, KEYS[1])
    os.utime(a, (1000, 1000))  # a written first, b later ...
    os.utime(b, (2000, 2000))
    assert cache.get(KEYS[0]) is not None  # ... but a is used again, so b is now the oldest use
    c = _put(cache, KEYS[2])
    assert a.exists() and c.exists() and not b.exists()
    assert sum(n for _, n, _ in cache.entries()) == 2 * size
    assert cache.get(KEYS[1]) is None and cache.get(KEYS[2]).status == "rejected"


def test_no_cap_keeps_everything_and_an_entry_larger_than_the_cap_is_not_cached(tmp_path):
    size = _put(_cache(tmp_path / "probe"), KEYS[0]).stat().st_size
    unbounded = _cache(tmp_path / "u")
    for k in KEYS:
        _put(unbounded, k)
    assert len(unbounded.entries()) == 4
    tiny = _cache(tmp_path / "t", (size - 1) / 1e9)
    assert _put(tiny, KEYS[0]) is None and tiny.entries() == []


def test_the_cap_is_a_simulator_setting_that_does_not_change_results():
    assert SimConfig().cache_max_gb == 10.0
    assert SimConfig(cache_max_gb=1.0).fingerprint() == SimConfig().fingerprint()
