"""Prompts in the LLM4Cov / CVDP-ECov style, one user-message builder per stimulus format.

The system message asks for a `filename:` line and one fenced block of stimulus only. The user
message carries the spec, the RTL and format-specific instructions. `render_prompt` applies the
tokenizer's chat template when it has one (plain text otherwise) and enforces a maximum prompt
length by shortening the RTL and spec, reporting what it cut.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..core.task import Task
from ..stimulus.aliases import alias_map, alias_table
from ..stimulus.program import __doc__ as VECTORS_DOC

SYSTEM = ("You write stimulus for hardware verification. Reply with a line `filename: <name>` and then "
          "exactly one fenced code block. The block holds stimulus only: no checks, assertions or "
          "expected values.")
FENCE = {"testbench": "systemverilog", "body": "systemverilog", "vectors": "vectors", "cocotb": "python"}
FILENAME = {"testbench": "{tb}", "body": "stimulus.sv", "vectors": "stimulus.vec", "cocotb": "stimulus.py"}


class PromptTooLong(ValueError):
    """Even the shortest prompt does not fit the context; the message says by how much."""


def _instructions(task: Task, fmt: str, compact: bool = False) -> str:
    if fmt == "testbench":
        return (f"Write a SystemVerilog testbench `{task.tb_name.rsplit('.', 1)[0]}` that instantiates the "
                f"`{task.top}` module with the instance name `{task.instance}`, drives input stimulus that "
                f"reaches high code coverage, and ends with $finish. Stimulus only.")
    table = alias_table(alias_map(task), descriptions=not compact)
    if fmt == "body":
        return ("chorus declares the signals below, instantiates the design, runs the clock and applies reset. "
                "Write only the statements of an initial block that drive the inputs, using these aliases "
                "(change inputs after `@(negedge clk)`):\n" + table)
    if fmt == "vectors":
        syntax = "\n\n".join(VECTORS_DOC.split("\n\n")[1:4]) if VECTORS_DOC and not compact else ""
        return ("Write stimulus vectors for these inputs:\n" + table + "\n\n" + syntax).rstrip()
    if fmt == "cocotb":
        return ("Write a cocotb module with `async def stimulus(dut)` that drives these aliases "
                "(`dut.in0.value = ...`, `await FallingEdge(dut.clk)`); chorus starts the clock and applies "
                "reset. Import only cocotb, random and math.\n" + table)
    raise ValueError(f"no prompt for stimulus format {fmt!r}")


def user_message(task: Task, fmt: str, rtl_chars: int | None = None, spec_chars: int | None = None,
                 compact: bool = False) -> str:
    """The user turn. A spec that must be shortened gives way to the task's brief (its compact spec)
    when it has one, rather than being cut mid-sentence; RTL cut to nothing is left out."""
    if spec_chars is None or spec_chars >= len(task.spec):
        spec = task.spec
    else:
        spec = task.brief or task.spec[:spec_chars]
    parts = [spec.strip()]
    for name, text in sorted(task.rtl.items()):
        if rtl_chars == 0:
            continue
        body = text if rtl_chars is None else text[:rtl_chars]
        cut = "\n// ... (truncated)" if rtl_chars is not None and len(text) > rtl_chars else ""
        parts.append(f"RTL `{name}`:\n```systemverilog\n{body.rstrip()}{cut}\n```")
    parts.append(_instructions(task, fmt, compact))
    parts.append(f"Answer with `filename: {FILENAME[fmt].format(tb=task.tb_name)}` and one ```{FENCE[fmt]} block.")
    return "\n\n".join(p for p in parts if p)


@dataclass(frozen=True)
class Prompt:
    text: str
    n_tokens: int
    truncated: bool
    note: str = ""  # what was shortened to fit


def messages(task: Task, fmt: str, **kw) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_message(task, fmt, **kw)}]


def render_messages(tokenizer, msgs: list[dict]) -> str:
    if getattr(tokenizer, "chat_template", None):
        # enable_thinking=False: Qwen3's template otherwise lets the model open a <think> block that eats
        # the completion budget; templates without the switch ignore it
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    return "\n\n".join(f"{m['role'].upper()}:\n{m['content']}" for m in msgs) + "\n\nASSISTANT:\n"


def fit_messages(task: Task, fmt: str, tokenizer, max_prompt_tokens: int) -> tuple[list[dict], Prompt]:
    """The task's chat messages shortened (RTL first, then the spec, replaced by the task's brief
    when it has one, then port descriptions and format notes) until the rendered prompt fits,
    and the rendered prompt. SFT uses the messages, so a model trains on the prompts it will see."""
    def size(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    msgs = messages(task, fmt)
    text = render_messages(tokenizer, msgs)
    n = size(text)
    if n <= max_prompt_tokens:
        return msgs, Prompt(text, n, False)
    longest = max((len(t) for t in task.rtl.values()), default=0)
    # with a brief every cut spec renders the same (the brief), so one cut is enough to try
    spec_fracs = (1.0, 0.0) if task.brief else (1.0, 0.5, 0.2, 0.0)
    for frac in (0.5, 0.25, 0.1, 0.0):
        for spec_frac in spec_fracs:
            rtl_chars, spec_chars = int(longest * frac), int(len(task.spec) * spec_frac)
            msgs = messages(task, fmt, rtl_chars=rtl_chars, spec_chars=spec_chars)
            text = render_messages(tokenizer, msgs)
            m = size(text)
            if m <= max_prompt_tokens:
                spec = ("spec replaced by its brief" if task.brief and spec_chars < len(task.spec)
                        else f"spec to {spec_chars} chars")
                return msgs, Prompt(text, m, True, f"prompt {n} tokens > {max_prompt_tokens}: RTL cut to "
                                                   f"{rtl_chars} chars per file, {spec}")
    # last resort for small contexts: the port table without spec descriptions, no syntax notes, with
    # the brief if it fits
    for bare in ((False, True) if task.brief else (True,)):
        shown = dataclasses.replace(task, brief="") if bare else task
        msgs = messages(shown, fmt, rtl_chars=0, spec_chars=0, compact=True)
        text = render_messages(tokenizer, msgs)
        m = size(text)
        if m <= max_prompt_tokens:
            spec = "spec replaced by its brief" if not bare else "spec removed"
            return msgs, Prompt(text, m, True, f"prompt {n} tokens > {max_prompt_tokens}: RTL removed, {spec}, "
                                               "port descriptions and format notes left out")
    raise PromptTooLong(f"task {task.id}: the prompt needs {m} tokens even with RTL, spec and port descriptions "
                        f"removed, more than max_prompt_tokens={max_prompt_tokens}; raise it or use a model with a "
                        "longer context")


def render_prompt(task: Task, fmt: str, tokenizer, max_prompt_tokens: int) -> Prompt:
    """The prompt text for `tokenizer`, shortened (RTL first, then spec) to fit."""
    return fit_messages(task, fmt, tokenizer, max_prompt_tokens)[1]
