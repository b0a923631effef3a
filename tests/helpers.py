"""Small designs, testbench builders and a `transformers serve` process shared by the tests."""
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


AND2 = """module and2(input logic a, input logic b, output logic y);
  assign y = a & b;
endmodule
"""

COUNTER = """module cnt(input logic clk, input logic rst_n, input logic en, output logic [3:0] q, output logic top);
  logic [7:0] mem [0:3];
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) q <= '0;
    else if (en) q <= q + 1'b1;
  end
  always_ff @(posedge clk) mem[q[1:0]] <= {4'h0, q};
  assign top = (q == 4'hf);
endmodule
"""


def counter_tb(body: str, extra: str = "") -> str:
    return f"""`timescale 1ns/1ps
module tb;
  logic clk = 0, rst_n = 0, en = 0; logic [3:0] q; logic top;
  cnt uut(.clk(clk), .rst_n(rst_n), .en(en), .q(q), .top(top));
  always #5 clk = ~clk;
{extra}
  initial begin
    #12 rst_n = 1; en = 1;
{body}
  end
endmodule
"""


PROMPT = 1200  # ports-only prompts: a tiny model cannot use the RTL, and short prompts keep steps fast


def rl_settings(**over):
    """The `rl` settings of a tiny run: 2 steps, 2 prompts x 4 samples, short answers (the rest, e.g.
    rl.reward and rl.engine=hf, are RLConf's defaults)."""
    from chorus.config.schema import RLConf

    base = dict(steps=2, prompts_per_step=2, group_size=4, micro_batch=3, lr=1e-3, warmup_steps=1, max_new_tokens=96,
                max_prompt_tokens=PROMPT, eval_every=0, eval_samples=1, save_every=1)
    return RLConf(**{**base, **over})


def context(out, sim, **over):
    """A job's shared settings as the tests run them: vectors, 2 simulation workers, seed 0."""
    from chorus.config.job_context import JobContext

    return JobContext(Path(out), "vectors", sim, **{"workers": 2, **over})


def weights(path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def lines(path) -> list[dict]:
    import json

    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def gradient_recorder():
    """A Lightning callback whose `.grads` gets the policy's (module.model's) whole gradient, flat, before
    every optimizer step. Built on call: helpers imports nothing heavy at import time."""
    import lightning as L
    import torch

    class Grads(L.Callback):
        def __init__(self):
            self.grads = []

        def on_before_optimizer_step(self, trainer, module, optimizer):
            self.grads.append(torch.cat([p.grad.flatten().clone() for p in module.model.parameters()]))

    return Grads()


def run_rank_script(script: str, cwd, args, timeout_s: float) -> str:
    """`python script *args` in `cwd` as a multi-rank job (tests/test_ddp.py, test_fsdp.py), within
    `timeout_s`; returns its log. Its own session: on a timeout the whole group goes, the ranks
    Lightning started included, and the test fails with the log's end."""
    import os
    import signal
    import subprocess
    import sys

    import pytest

    job = subprocess.Popen([sys.executable, script, *args], cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        log, _ = job.communicate()
        pytest.fail(f"the job {list(args)} did not end within {timeout_s} s (a rank waits on a collective the "
                    f"other never joins); its log ends:\n{log[-3000:]}")
    assert job.returncode == 0, log[-5000:]
    return log


class Server:
    """`transformers serve` on one localhost port; start() again after kill() reuses the port."""

    def __init__(self, model: Path, log_dir: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.model, self.log_dir, self.proc, self.starts = model, log_dir, None, 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Path:
        """Starts the server and returns its log (it logs each request it receives)."""
        self.starts += 1
        log = self.log_dir / f"serve{self.starts}.log"
        with open(log, "w") as f:
            self.proc = subprocess.Popen(["transformers", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                                          str(self.model)], stdout=f, stderr=subprocess.STDOUT,
                                         start_new_session=True,  # its request lines reach the log as they happen
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1)
                return log
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"transformers serve did not answer /health within a minute: {log.read_text()[-500:]}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
