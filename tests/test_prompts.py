"""Prompts: chat template, per-format instructions, and honest truncation."""
import dataclasses

import pytest
from transformers import AutoTokenizer

from chorus.policy.prompts import PromptTooLong, messages, render_prompt, user_message
from chorus.tasks import load_tasks


@pytest.fixture(scope="module")
def task():
    return load_tasks("generated", per_family=1, families=["counter"])[0]


@pytest.fixture(scope="module")
def tok(tiny_xs):
    return AutoTokenizer.from_pretrained(tiny_xs)


@pytest.mark.parametrize("fmt, must", [
    ("testbench", ["instance name `uut`", "```systemverilog block", "filename: tb.sv"]),
    ("body", ["in0 |", "@(negedge clk)", "filename: stimulus.sv"]),
    ("vectors", ["in2=? x100", "rst x2", "```vectors block"]),
    ("cocotb", ["async def stimulus(dut)", "```python block"]),
])
def test_user_message_carries_spec_rtl_and_format_instructions(task, fmt, must):
    text = user_message(task, fmt)
    assert task.spec.strip()[:60] in text and "RTL `rtl/" in text
    for m in must:
        assert m in text, m


def test_chat_template_is_used_when_the_tokenizer_has_one(task, tok):
    p = render_prompt(task, "vectors", tok, 10_000)
    assert p.text.startswith("<|im_start|>system\n") and p.text.endswith("<|im_start|>assistant\n")
    assert not p.truncated and p.n_tokens == len(tok(p.text, add_special_tokens=False)["input_ids"])


def test_plain_text_without_a_template(task, tok):
    tok = AutoTokenizer.from_pretrained(tok.name_or_path)
    tok.chat_template = None
    p = render_prompt(task, "body", tok, 10_000)
    assert p.text.startswith("SYSTEM:\n") and p.text.endswith("ASSISTANT:\n")


def test_long_prompts_are_cut_and_say_so(task, tok):
    full = render_prompt(task, "vectors", tok, 10_000)
    short = render_prompt(task, "vectors", tok, full.n_tokens // 2)
    assert short.truncated and short.n_tokens <= full.n_tokens // 2
    assert f"prompt {full.n_tokens} tokens > {full.n_tokens // 2}" in short.note
    with pytest.raises(PromptTooLong, match="raise it or use a model with a longer context"):
        render_prompt(task, "vectors", tok, 50)


def test_messages_are_system_then_user(task):
    roles = [m["role"] for m in messages(task, "testbench")]
    assert roles == ["system", "user"]


def test_small_contexts_drop_port_descriptions_and_format_notes_last():
    from chorus.policy.tiny import build_tiny

    tok = AutoTokenizer.from_pretrained(build_tiny("xs"))
    task = load_tasks("generated", split="test", difficulty="medium", per_family=8, families=["alu"], seed=100)[0]
    roomy = render_prompt(task, "vectors", tok, 1500)
    assert "description" in roomy.text and "| in0" not in roomy.note
    tight = render_prompt(task, "vectors", tok, 400)
    assert tight.n_tokens <= 400 < roomy.n_tokens and "port descriptions and format notes left out" in tight.note
    assert "alias | width | dir | port\n" in tight.text and "in0 | " in tight.text and "description" not in tight.text
    with pytest.raises(PromptTooLong, match="even with RTL, spec and port descriptions removed"):
        render_prompt(task, "vectors", tok, 100)


def test_a_spec_that_does_not_fit_gives_way_to_the_brief_not_a_cut(task, tok):
    # the brief (the compact spec) replaces the spec whole
    full = render_prompt(task, "vectors", tok, 10_000)
    spec_tokens = len(tok(task.spec, add_special_tokens=False)["input_ids"])
    short = render_prompt(task, "vectors", tok, full.n_tokens - spec_tokens // 2)
    assert "spec replaced by its brief" in short.note
    assert task.brief in short.text and "## Description" not in short.text
    # a task without a brief still gets its spec cut, as before
    bare = dataclasses.replace(task, brief="")
    cut = render_prompt(bare, "vectors", tok, full.n_tokens - spec_tokens // 2)
    assert "spec to" in cut.note and bare.spec[:80] in cut.text and "Key facts" not in cut.text
    # RTL cut to nothing is left out rather than shown as an empty block
    tight = render_prompt(task, "vectors", tok, 600)
    assert "RTL removed, spec replaced by its brief" in tight.note and "RTL `rtl/" not in tight.text
