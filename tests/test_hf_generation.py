"""The hf engine's generation modes (plain | static | auto) and its incremental fence stop.

A real xs model is fitted for a few steps on prompts whose answers close a fence (``` and ~~~), so
greedy decoding stops at a closed fence on some rows, at EOS or max_new_tokens on others, in one
left-padded batch of prompts of different lengths. torch.compile on this CPU works but its first
call takes about a minute (measured: 58 s for the xs model), so the static path is tested here
without compiling (the static KV cache and its masks are what change the numbers; CUDA graphs replay
the same kernels); bench/gpu_step.py measures the compiled path on a GPU.
"""
import inspect
import random

import pytest
import torch

from chorus.config_schema import PolicyConf, RLConf
from chorus.policy.engines import HFEngine, SamplingParams, make_engine
from chorus.policy.fence_stop import FenceStop, fence_closed
from chorus.policy.hf_generation import resolve_mode
from chorus.policy.models import load_model

PAIRS = [("alpha\n", "```vectors\nin0=1\nin1=0\n```\nrest"),
         ("a longer prompt about a counter design\n", "~~~\nreset\n~~~ trailing"),
         ("beta gamma\n", "```\nx=1\n```")]
PROMPTS = [p for p, _ in PAIRS] + ["unseen words here\n"]


@pytest.fixture(scope="module")
def fenced(tiny_xs):
    """(model, tokenizer): the xs model after 60 AdamW steps on PAIRS (one thread, about 2 s)."""
    torch.set_num_threads(1)
    model, tok = load_model("hf", path=str(tiny_xs))
    tok.padding_side = "right"
    batch = tok([p + c + tok.eos_token for p, c in PAIRS], return_tensors="pt", padding=True,
                add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    tok.padding_side = "left"
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(60):
        opt.zero_grad()
        model(**batch, labels=labels).loss.backward()
        opt.step()
    model.eval()
    return model, tok


def old_fence_criterion(tok, width):
    """The stop check HFEngine used before (whole completions decoded at every step): the oracle."""
    from transformers import StoppingCriteria

    class FenceClosed(StoppingCriteria):
        def __call__(self, input_ids, scores, **kw):
            done = [fence_closed(tok.decode(seq[width:], skip_special_tokens=True)) for seq in input_ids]
            return torch.tensor(done, device=input_ids.device)
    return FenceClosed()


GREEDY = SamplingParams(max_new_tokens=16, temperature=0)


@pytest.mark.slow
def test_the_incremental_stop_ends_each_row_where_the_old_full_check_did(fenced):
    from transformers import StoppingCriteriaList

    model, tok = fenced
    gens = HFEngine(model, tok, generation="plain").generate(PROMPTS, params=GREEDY)
    batch = tok(PROMPTS, return_tensors="pt", padding=True, add_special_tokens=False)
    width = batch["input_ids"].shape[1]
    old = model.generate(**batch, max_new_tokens=16, do_sample=False, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id,
                         stopping_criteria=StoppingCriteriaList([old_fence_criterion(tok, width)]))
    assert sorted({g[0].finish_reason for g in gens}) == ["eos", "length", "stop"]
    assert old.shape[1] == width + max(len(g[0].token_ids) for g in gens)
    for row, [g] in zip(old[:, width:].tolist(), gens):
        assert row[:len(g.token_ids)] == g.token_ids
        assert all(t == tok.pad_token_id for t in row[len(g.token_ids):])  # the old check ended it there too


@pytest.mark.slow
@pytest.mark.parametrize("params", [GREEDY, SamplingParams(max_new_tokens=16, temperature=1.0, seed=3)],
                         ids=["greedy", "sampled"])
def test_static_cache_decoding_gives_the_plain_path_s_tokens_text_reasons_and_logprobs(fenced, params):
    model, tok = fenced
    plain = HFEngine(model, tok, generation="plain").generate(PROMPTS, n=2, params=params)
    static = HFEngine(model, tok, generation="static", compile=False).generate(PROMPTS, n=2, params=params)
    if params.temperature == 0:
        assert sorted({g.finish_reason for gs in plain for g in gs}) == ["eos", "length", "stop"]
    for a, b in zip([g for gs in plain for g in gs], [g for gs in static for g in gs]):
        assert (b.token_ids, b.text, b.finish_reason, b.prompt_tokens) == \
            (a.token_ids, a.text, a.finish_reason, a.prompt_tokens)
        assert len(b.logprobs) == len(a.logprobs)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


@pytest.mark.slow
def test_later_static_calls_with_another_batch_and_length_still_match_plain(fenced):
    """transformers keeps a static cache as long as the longest call so far: a later, smaller batch
    decodes on a cache longer than it needs, and a shorter one on a fresh cache."""
    model, tok = fenced
    plain = HFEngine(model, tok, generation="plain")
    static = HFEngine(model, tok, generation="static", compile=False)
    for prompts, tokens in ((PROMPTS, 24), (PROMPTS[1:3], 8), (PROMPTS[::-1], 30)):
        params = SamplingParams(max_new_tokens=tokens, temperature=0)
        a, b = plain.generate(prompts, params=params), static.generate(prompts, params=params)
        assert [(g.token_ids, g.finish_reason) for [g] in a] == [(g.token_ids, g.finish_reason) for [g] in b]


@pytest.mark.slow
def test_logprobs_are_those_of_the_model_s_forward_pass(fenced):
    """Greedy log-probs equal log_softmax of a plain forward over prompt + completion."""
    model, tok = fenced
    for [g], prompt in zip(HFEngine(model, tok, generation="static", compile=False).generate(PROMPTS, params=GREEDY),
                           PROMPTS):
        ids = tok(prompt, add_special_tokens=False)["input_ids"] + g.token_ids
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits[len(ids) - len(g.token_ids) - 1:-1], -1)
        want = lp.gather(1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(g.logprobs), want, atol=1e-4)


def _first_close(tok, ids: list[int]) -> int | None:
    """Where the full check first fires on `ids` (token index), or None."""
    for k in range(1, len(ids) + 1):
        if fence_closed(tok.decode(ids[:k], skip_special_tokens=True)):
            return k - 1
    return None


def test_fence_stop_fires_at_the_same_token_as_the_full_check_and_rarely_decodes(tiny_xs):
    """Token by token over real fenced texts (``` and ~~~, a tag, CRLF, a line separator, text after
    the closing fence, specials) and random sequences heavy in backticks, tildes, blanks and newlines."""
    _, tok = load_model("hf", path=str(tiny_xs))
    texts = ["filename: a.vec\n```vectors\nin0=1\nin1=0\n```\nmore", "~~~\nreset\n~~~", "``` ```\n```",
             "x\r\n```\r\nab\r\n```\r\n", "é```\u2028a\u2028```", "```sv\nmodule m;\nendmodule\n```sv\n",
             "no fence here at all, just `code` and ~tilde~\n" * 3, "```\n\n   ```   \n\n"]
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    seqs.append(seqs[0][:4] + [tok.pad_token_id, tok.eos_token_id] + seqs[0][4:])
    vocab = range(len(tok))
    heavy = [t for t in vocab if any(c in tok.decode([t]) for c in "`~\n") or not tok.decode([t]).strip()]
    newline = [t for t in vocab if "\n" in tok.decode([t])]
    tick, tilde = tok.convert_tokens_to_ids("`"), tok.convert_tokens_to_ids("~")
    pools = [[tick]] * 5 + [newline] * 2 + [[tilde]] * 2 + [heavy, vocab]  # this vocabulary has no ``` token
    rng = random.Random(0)
    for _ in range(150):
        seqs.append([rng.choice(rng.choice(pools)) for _ in range(40)])
    closing = 0
    for ids in seqs:
        want = _first_close(tok, ids)
        state = FenceStop(tok, 1)
        got = next((k for k, t in enumerate(ids) if state.update([t])[0]), None)
        assert got == want, (tok.decode(ids), got, want)
        closing += want is not None
    assert closing >= 30  # the random sequences do exercise the stop, not only the texts
    long_text = "```vectors\n" + "".join(f"in0={i % 2}\nin1={i % 3}\n" for i in range(60)) + "```\n"
    ids = tok(long_text, add_special_tokens=False)["input_ids"]
    state = FenceStop(tok, 1)
    assert [state.update([t])[0] for t in ids].index(True) == _first_close(tok, ids)
    assert state.full_checks <= 3 < len(ids)  # whole-completion decodes only near the closing fence


@pytest.mark.slow
def test_the_mode_is_one_setting_with_one_default_and_bad_modes_fail_early(fenced):
    model, tok = fenced
    default = inspect.signature(HFEngine).parameters["generation"].default
    assert default == inspect.signature(make_engine).parameters["generation"].default
    assert RLConf().generation == PolicyConf().generation == default == "plain"
    assert resolve_mode("auto", "cpu") == "plain" and resolve_mode("auto", "cuda") == "static"
    assert resolve_mode("static", "cpu") == "static" and resolve_mode("plain", "cuda") == "plain"
    with pytest.raises(ValueError, match="unknown generation mode 'fast'; choose one of auto, plain, static"):
        HFEngine(model, tok, generation="fast")
