"""Execute an analysis notebook as a user does from the repository root (`CHORUS_RUNS=... jupyter nbconvert
--execute analysis/X.ipynb`): the kernel in analysis/, $PWD the launch dir. The executed copy is returned
and the notebook's own file left as it is."""
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = ROOT / "analysis"


def execute(path: Path, env: dict[str, str], launch: Path = ROOT, expect_error: bool = False):
    """The notebook at `path`, executed with `env` added to this process's ($CHORUS_RUNS and $CHORUS_STUDY
    only as `env` gives them). With `expect_error`, the notebook as it stood when a cell failed (it must
    fail); otherwise a failing cell raises CellExecutionError with its traceback."""
    nb = nbformat.read(path, as_version=4)
    kernel_env = {k: v for k, v in os.environ.items() if k not in ("CHORUS_RUNS", "CHORUS_STUDY")}
    kernel_env.update(PWD=str(launch), MPLBACKEND="Agg", **env)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute(env=kernel_env)
    except CellExecutionError:
        if expect_error:
            return nb
        raise
    assert not expect_error, f"{path.name} ran to the end"
    return nb


def outputs(nb) -> str:
    """Every code cell's text, plain and markdown output (a notebook node, or the path of one that must hold
    no error)."""
    if not isinstance(nb, nbformat.NotebookNode):
        nb = nbformat.read(nb, as_version=4)
        assert not errors(nb)
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     + str(o.get("data", {}).get("text/markdown", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def errors(nb) -> list[str]:
    """The traceback lines of every error output, as the user sees them."""
    return [line for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
            for line in o.get("traceback", [])]
