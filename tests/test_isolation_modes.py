"""simulator.isolation: what the kernel grants, and what required / best_effort do without it.

A kernel that lacks namespaces is made for real: chorus_jail's own seccomp filter denies
unshare(2), so a probe run inside a jail finds no namespaces, exactly as on such a kernel."""
import json
import subprocess
import sys
import textwrap

import pytest

from chorus.sim import isolation


def test_this_kernel_grants_every_layer(cache_root):
    layers = isolation.probe(str(cache_root))
    assert isolation.missing_layers(layers) == [], layers
    assert layers["landlock_abi"] >= isolation.MIN_LANDLOCK_ABI


def test_missing_layers_are_named():
    layers = {"user_namespace": 1, "net_namespace": 0, "pid_namespace": 1, "mount_namespace": 1,
              "landlock_abi": 3, "seccomp": 1}
    assert isolation.missing_layers(layers) == ["net_namespace", "Landlock ABI 6 (kernel has 3)"]


PROBE_INSIDE = textwrap.dedent("""
    import json, sys, warnings
    from chorus.sim import isolation
    root = sys.argv[1]
    out = {"layers": isolation.probe(root)}
    try:
        isolation.check("required", root)
        out["required"] = None
    except isolation.IsolationError as exc:
        out["required"] = str(exc)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        isolation.check("best_effort", root)
        isolation.check("best_effort", root)
    out["warnings"] = [str(w.message) for w in seen]
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_required_refuses_and_best_effort_warns_once_on_a_kernel_without_namespaces(cache_root, tmp_path):
    import chorus

    root = str(cache_root)
    jail = isolation.jail_binary(root)  # built here, outside: the jailed probe only runs it
    repo = str(__import__("pathlib").Path(chorus.__file__).resolve().parent.parent)
    cmd = [str(jail), "--ro", repo, "--rw", root, "--rw", str(tmp_path)]
    for p in isolation.system_read_paths():
        cmd += ["--ro", p]
    cmd += ["--", sys.executable, "-c", PROBE_INSIDE, root]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": repo, "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["layers"]["user_namespace"] == 0 and out["layers"]["pid_namespace"] == 0
    assert "isolation is required" in out["required"] and "user_namespace" in out["required"]
    assert "isolation=best_effort" in out["required"]  # the error names the fix
    assert len(out["warnings"]) == 1 and "WEAKER ISOLATION" in out["warnings"][0]
    assert "UNTRUSTED TESTBENCHES RUN WITH WEAKER ISOLATION" in r.stderr


def test_an_unknown_mode_is_a_one_line_error():
    from chorus.sim.config import sim_config

    with pytest.raises(ValueError, match="simulator.isolation='requried' is not one of"):
        sim_config({"isolation": "requried"})
