"""The hf engine's generation modes (shared | plain | static | auto) and its incremental fence stop.

Two real xs models:
- `scripted`: the xs model rewired so that greedy decoding follows fixed token chains by
  construction, whatever the CPU: one row ends at EOS, one at max_new_tokens, two at a closed fence
  (see `scripted` for why its choices cannot flip). The finish kinds are asserted on it.
- `fenced`: the xs model fitted for a few steps on fenced answers. Its outputs depend on the CPU's
  floating-point path, so it is used only to compare two decoding paths on the same machine (plain
  vs static cache or shared prefill: same tokens, same log-probs), never for which row ends how.

torch.compile on this CPU works but its first call takes about a minute (measured: 58 s for the xs
model), so the static path is tested here without compiling (the static KV cache and its masks are
what change the numbers; CUDA graphs replay the same kernels); bench/gpu_step.py measures the
compiled path on a GPU.
"""
import inspect
import random

import pytest
import torch

from chorus.config.schema import PolicyConf, RLConf
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


# The scripted rows: each prompt's last token starts a chain of token texts (None: EOS). Greedy
# decoding follows the chain; a chain that returns to an earlier token cycles. The fence line is
# " ```." (' `', '`', '`.'): this byte-level vocabulary has no ``` token, and a bigram needs each
# token to have one successor, so the three backticks are three different tokens.
FENCE_LINE = [" `", "`", "`."]
SCRIPTS = {"alpha beta": FENCE_LINE + ["\n"] + FENCE_LINE,                 # stop: " ```.\n ```." closes
           "counter reset": ["end", None],                                 # eos
           "a counter design": ["x", "y", "x"],                            # length: xyxy... never ends
           "one more prompt": ["\n"] + FENCE_LINE + ["\n"] + FENCE_LINE}  # stop, after a leading newline
S_PROMPTS = list(SCRIPTS)
MARGIN = 10.0  # the least logit gap the construction must show between the scripted token and any other


@pytest.fixture(scope="module")
def scripted(tiny_xs):
    """(model, tokenizer, expected completions): the real xs model (its layers, attention, caches and
    generate untouched) whose logits are dominated by a bigram table written into its weights.

    Each scripted token t gets its own embedding axis k(t) at scale 8; the layers' RMSNorm-ed inputs
    keep their additions small, so after the final norm the hidden state lies mostly along k(t). The
    untied lm_head maps axis k(t) to successor(t) with weight 2: a logit near 20 against near 0 for
    every other token. That gap (checked below to exceed MARGIN on every scripted step) is about 10^6
    times any float-path difference, so greedy decoding is the script on any CPU, while the small
    context-dependent part still differs between positions and rows."""
    model, tok = load_model("hf", path=str(tiny_xs))
    tok.padding_side = "left"
    ids = {text: _single_token(tok, text) for text in {t for chain in SCRIPTS.values() for t in chain if t}}
    ids[None] = tok.eos_token_id
    successor = {}
    for prompt, chain in SCRIPTS.items():
        last = tok(prompt, add_special_tokens=False)["input_ids"][-1]
        for a, b in zip([last] + [ids[t] for t in chain[:-1]], [ids[t] for t in chain]):
            assert successor.setdefault(a, b) == b, f"the scripts give token {a} two successors"
    axes = {t: k for k, t in enumerate(sorted(successor))}
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        model.lm_head.weight = torch.nn.Parameter(emb.detach().clone())  # untied: the bigram table
        model.config.tie_word_embeddings = False
        head = model.lm_head.weight
        head[:, :len(axes)] = 0
        for t, k in axes.items():
            emb[t] = 0
            emb[t, k] = 8.0
            head[successor[t], k] = 2.0
    model.eval()
    expected = {p: _follow(successor, tok(p, add_special_tokens=False)["input_ids"][-1], tok.eos_token_id, 16)
                for p in S_PROMPTS}
    for prompt, completion in expected.items():  # the construction holds on this CPU, with room to spare
        full = tok(prompt, add_special_tokens=False)["input_ids"] + completion
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([full])).logits[0, -len(completion) - 1:-1]
        top2 = logits.topk(2, -1)
        assert top2.indices[:, 0].tolist() == completion
        assert (top2.values[:, 0] - top2.values[:, 1]).min() > MARGIN
    return model, tok, expected


def _single_token(tok, text: str) -> int:
    got = tok(text, add_special_tokens=False)["input_ids"]
    assert len(got) == 1 and tok.decode(got) == text, f"{text!r} is not one token of this vocabulary"
    return got[0]


def _follow(successor: dict, token: int, eos: int, limit: int) -> list[int]:
    """The greedy completion the bigram table writes after `token`: up to `limit` tokens or EOS."""
    out = []
    while len(out) < limit:
        token = successor[token]
        out.append(token)
        if token == eos:
            break
    return out


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
def test_the_incremental_stop_ends_each_row_where_the_old_full_check_did(scripted):
    from transformers import StoppingCriteriaList

    model, tok, expected = scripted
    gens = HFEngine(model, tok, generation="plain").generate(S_PROMPTS, params=GREEDY)
    batch = tok(S_PROMPTS, return_tensors="pt", padding=True, add_special_tokens=False)
    width = batch["input_ids"].shape[1]
    old = model.generate(**batch, max_new_tokens=16, do_sample=False, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id,
                         stopping_criteria=StoppingCriteriaList([old_fence_criterion(tok, width)]))
    assert [g.finish_reason for [g] in gens] == ["stop", "eos", "length", "stop"]
    # each row is its script up to where it ends; the stop rows end on the token that closes the fence
    assert [len(g.token_ids) for [g] in gens] == [7, 2, 16, 8]
    assert [g.token_ids for [g] in gens] == [expected[p][:len(g.token_ids)] for p, [g] in zip(S_PROMPTS, gens)]
    assert [g.text for [g] in gens[:2]] == [" ```.\n ```.", "end"]
    assert old.shape[1] == width + max(len(g[0].token_ids) for g in gens)
    for row, [g] in zip(old[:, width:].tolist(), gens):
        assert row[:len(g.token_ids)] == g.token_ids
        assert all(t == tok.pad_token_id for t in row[len(g.token_ids):])  # the old check ended it there too


SAMPLED = SamplingParams(max_new_tokens=16, temperature=1.0, seed=3)


@pytest.mark.slow
@pytest.mark.parametrize("mode,which,params", [
    ("static", "scripted", GREEDY), ("static", "fenced", GREEDY), ("static", "fenced", SAMPLED),
    ("shared", "scripted", GREEDY), ("shared", "fenced", GREEDY)],
    ids=["static-scripted-greedy", "static-fenced-greedy", "static-fenced-sampled", "shared-scripted-greedy",
         "shared-fenced-greedy"])
def test_other_decoding_paths_give_the_plain_path_s_tokens_text_reasons_and_logprobs(request, which, params, mode):
    """static: a static KV cache; shared: each prompt (of different lengths: left padding) prefilled once
    for its two samples, finished rows leaving the batch. (Shared sampling draws from the same
    distributions as plain but consumes the random stream differently: tested below.)"""
    model, tok = request.getfixturevalue(which)[:2]
    prompts = S_PROMPTS if which == "scripted" else PROMPTS
    plain = HFEngine(model, tok, generation="plain").generate(prompts, n=2, params=params)
    static = HFEngine(model, tok, generation=mode, compile=False).generate(prompts, n=2, params=params)
    if which == "scripted":  # every finish kind goes through the other path too
        assert [g.finish_reason for gs in static for g in gs] == [r for r in ("stop", "eos", "length", "stop")
                                                                  for _ in range(2)]
    for a, b in zip([g for gs in plain for g in gs], [g for gs in static for g in gs]):
        assert (b.token_ids, b.text, b.finish_reason, b.prompt_tokens) == \
            (a.token_ids, a.text, a.finish_reason, a.prompt_tokens)
        assert len(b.logprobs) == len(a.logprobs)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


@pytest.mark.slow
def test_shared_sampling_follows_a_script_it_cannot_leave(scripted):
    """At T=0.25 the scripted token leads every other by about 80 in the tempered logits: sampling
    follows the script by construction, so every finish kind is checked through the sampling path."""
    model, tok, expected = scripted
    params = SamplingParams(max_new_tokens=16, temperature=0.25, seed=5)
    gens = HFEngine(model, tok, generation="shared").generate(S_PROMPTS, n=3, params=params)
    assert [[g.finish_reason for g in gs] for gs in gens] == [[r] * 3 for r in ("stop", "eos", "length", "stop")]
    for prompt, gs in zip(S_PROMPTS, gens):
        assert all(g.token_ids == expected[prompt][:len(g.token_ids)] for g in gs)
    assert [len(gs[0].token_ids) for gs in gens] == [7, 2, 16, 8]


@pytest.mark.slow
def test_shared_sampling_draws_from_the_model_s_tempered_distribution(fenced):
    """2000 one-token samples of one prompt at T=2: each token's count is within 5 binomial standard
    deviations of 2000 x its probability under the forward's tempered softmax (a false alarm has
    probability below 1e-5 over the tokens checked); log-probs are those of that softmax; a seed
    repeats its samples."""
    model, tok = fenced
    prompt, rows, temperature = PROMPTS[3], 2000, 2.0  # a prompt it was not fitted on: a spread distribution
    params = SamplingParams(max_new_tokens=1, temperature=temperature, seed=11)
    engine = HFEngine(model, tok, generation="shared")
    [gens] = engine.generate([prompt], n=rows, params=params)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])).logits[0, -1]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in gens]), minlength=logp.numel()).double()
    p = logp.exp().double()
    checked = p * rows >= 5  # tokens likely enough to count
    assert checked.sum() >= 3  # a spread distribution, so the test can see a wrong one
    # each likely token, and the rest together as one outcome
    expected = torch.cat([rows * p[checked], (rows * p[~checked].sum())[None]])
    seen = torch.cat([counts[checked], counts[~checked].sum()[None]])
    z = (seen - expected) / (expected * (1 - expected / rows)).sqrt()
    assert z.abs().max() < 5, z
    assert all(abs(g.logprobs[0] - logp[g.token_ids[0]].item()) < 1e-4 for g in gens)
    again = engine.generate([prompt], n=rows, params=params)[0]
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]


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
    assert RLConf().generation == PolicyConf().generation == default == "shared"
    assert resolve_mode("auto", "cpu") == "shared" and resolve_mode("auto", "cuda") == "static"
    assert resolve_mode("static", "cpu") == "static" and resolve_mode("plain", "cuda") == "plain"
    with pytest.raises(ValueError, match="unknown generation mode 'fast'; choose one of auto, plain, static, shared"):
        HFEngine(model, tok, generation="fast")


def test_a_growing_cache_layer_holds_what_concatenation_would():
    """GrowingLayer (shared mode): updates, repetition per sample, row selection and cropping give the
    keys and values DynamicLayer's concatenation gives, across buffer growth (64, then doubling)."""
    from transformers.cache_utils import DynamicLayer

    from chorus.policy.hf_generation import GrowingLayer

    torch.manual_seed(0)
    grow, cat = GrowingLayer(), DynamicLayer()
    for layer in (grow, cat):
        layer.update(*[torch.arange(2 * 3 * 5 * 4, dtype=torch.float32).reshape(2, 3, 5, 4)] * 2)
        layer.batch_repeat_interleave(3)
        layer.batch_select_indices(torch.tensor([0, 2, 3, 5]))
    for step in range(150):  # past 64 and 128 positions
        k, v = torch.randn(4, 3, 1, 4), torch.randn(4, 3, 1, 4)
        assert all(torch.equal(a, b) for a, b in zip(grow.update(k, v), cat.update(k, v)))
    grow.crop(-7)
    cat.crop(-7)
    assert grow.get_seq_length() == cat.get_seq_length() == 5 + 150 - 7
    k, v = torch.randn(4, 3, 2, 4), torch.randn(4, 3, 2, 4)
    assert all(torch.equal(a, b) for a, b in zip(grow.update(k, v), cat.update(k, v)))


def test_a_prefill_in_row_chunks_caches_what_one_forward_caches(fenced):
    """shared_prefix_cache under a token budget that takes one row per forward (PROMPTS differ in
    length: left padding, and each chunk only as wide as its row) holds, row for row and sample for
    sample, at every real position the keys and values one forward over every prompt gives; its
    padded positions are zeros (masked either way)."""
    from chorus.policy.hf_generation import shared_prefix_cache

    model, tok = fenced
    once = tok(PROMPTS, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = once["input_ids"], once["attention_mask"]
    assert len(set(mask.sum(1).tolist())) == 3  # rows of three widths: chunks of three widths
    whole = shared_prefix_cache(model, ids, mask, 2)
    chunked = shared_prefix_cache(model, ids, mask, 2, max_tokens=1)
    real = mask[:, :-1].bool().repeat_interleave(2, 0)
    assert chunked.get_seq_length() == whole.get_seq_length() == ids.shape[1] - 1
    for a, b in zip(whole.layers, chunked.layers):
        assert a.keys.shape == b.keys.shape == (2 * len(PROMPTS), *a.keys.shape[1:])
        for x, y in ((a.keys, b.keys), (a.values, b.values)):
            x, y = x.transpose(1, 2), y.transpose(1, 2)  # [rows, positions, heads, d]
            assert torch.allclose(x[real], y[real], atol=1e-5)
            assert not y[~real].any()


@pytest.mark.parametrize("params", [GREEDY, SamplingParams(max_new_tokens=12, temperature=0.7, seed=3)],
                         ids=["greedy", "sampled"])
def test_decoding_after_a_chunked_prefill_gives_one_forward_s_tokens(fenced, monkeypatch, params):
    """generation=shared with PREFILL_TOKENS so small that every prompt is its own chunk: the same
    tokens and (within float noise) log-probs as with every prompt in one forward, on the same seed."""
    import chorus.policy.hf_generation as hf

    model, tok = fenced
    engine = HFEngine(model, tok, generation="shared")
    whole = engine.generate(PROMPTS, n=2, params=params)
    monkeypatch.setattr(hf, "PREFILL_TOKENS", 1)
    chunked = engine.generate(PROMPTS, n=2, params=params)
    for a, b in zip([g for gs in whole for g in gs], [g for gs in chunked for g in gs]):
        assert (a.token_ids, a.finish_reason) == (b.token_ids, b.finish_reason)
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


@pytest.mark.parametrize("params", [SamplingParams(max_new_tokens=12, temperature=0.7, top_k=5, top_p=0.9, seed=4),
                                    GREEDY], ids=["sampled-topk-topp", "greedy"])
def test_sampled_logprobs_without_per_step_scores_equal_transformers_own(fenced, params):
    """The plain path records each sampled token's log-prob itself (SampledLogprobs, one [rows, vocab]
    buffer) instead of keeping every step's scores: the same tokens as transformers' own warpers
    draw with the same seed, and the log-probs compute_transition_scores gives from output_scores."""
    from transformers import StoppingCriteriaList

    from chorus.policy.hf_generation import FenceCriteria

    model, tok = fenced
    [gens] = [HFEngine(model, tok, generation="plain").generate(PROMPTS[:2], n=3, params=params)]
    batch = tok([p for p in PROMPTS[:2] for _ in range(3)], return_tensors="pt", padding=True, add_special_tokens=False)
    width, sample = batch["input_ids"].shape[1], params.temperature > 0
    torch.manual_seed(params.seed)
    out = model.generate(**batch, max_new_tokens=params.max_new_tokens, do_sample=sample,
                         temperature=params.temperature if sample else None, top_k=params.top_k if sample else None,
                         top_p=params.top_p if sample else None, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, output_scores=True, return_dict_in_generate=True,
                         stopping_criteria=StoppingCriteriaList([FenceCriteria(tok, 6, width, "cpu")]))
    want = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    for row, g in enumerate(g for gs in gens for g in gs):
        n = len(g.token_ids)
        assert g.token_ids == out.sequences[row, width:width + n].tolist() and n > 0
        torch.testing.assert_close(torch.tensor(g.logprobs), want[row, :n].float(), rtol=0, atol=1e-4)
    if sample:  # top-k 5 cut most of the vocabulary: a token outside it would be -inf
        assert all(lp > -30 for gs in gens for g in gs for lp in g.logprobs)


def test_each_prompt_s_group_is_handed_on_as_soon_as_its_rows_finish(scripted, monkeypatch):
    """generation=shared reports a prompt's samples while the other rows still decode (a rollout
    scores them meanwhile): on the scripted model "counter reset" ends at EOS after 2 tokens, "a
    counter design" runs to the 16-token limit, so the first is reported while the second has only a
    few tokens; every prompt is reported once, with exactly the samples generate returns."""
    model, tok, expected = scripted
    engine = HFEngine(model, tok, generation="shared")
    long_row = S_PROMPTS.index("a counter design")
    calls = []

    def on_group(i, samples):
        # the long row's tokens so far: the decode loop's own lists, read through the engine's state
        calls.append((i, samples, progress["long"]()))

    progress = {"long": lambda: None}
    import chorus.policy.shared_decode as sd
    real = sd.shared_decode

    def watched(model, tok, prompts, n, params, eos, on_prompt_done=None):
        def done(i, tokens, logprobs, lens):
            progress["long"] = lambda: len(tokens[long_row * n])
            on_prompt_done(i, tokens, logprobs, lens)
        return real(model, tok, prompts, n, params, eos, on_prompt_done=done)

    monkeypatch.setattr(sd, "shared_decode", watched)
    out = engine.generate(S_PROMPTS, n=2, params=GREEDY, on_group=on_group)
    assert sorted(i for i, _, _ in calls) == list(range(len(S_PROMPTS)))
    assert all(samples is out[i] for i, samples, _ in calls)
    order = [i for i, _, _ in calls]
    eos_row = S_PROMPTS.index("counter reset")
    assert order[-1] == long_row and order.index(eos_row) < order.index(long_row)
    seen_then = next(t for i, _, t in calls if i == eos_row)
    assert seen_then == len(expected["counter reset"]) < 16  # reported at its own end, not the batch's
    assert [g.token_ids for g in out[long_row]] == [expected["a counter design"]] * 2


def test_the_batch_paths_hand_on_every_group_once_at_the_end(scripted):
    model, tok, _ = scripted
    calls = []
    out = HFEngine(model, tok, generation="plain").generate(S_PROMPTS[:2], n=1, params=GREEDY,
                                                           on_group=lambda i, s: calls.append((i, s)))
    assert [i for i, _ in calls] == [0, 1] and all(s is out[i] for i, s in calls)


def test_keeping_each_prompt_s_prefix_once_gives_the_copied_prefix_s_tokens_and_logprobs(fenced, scripted,
                                                                                          monkeypatch):
    """generation=shared keeps each prompt's prefix once (prefix_attention.py) on a Qwen3 model: the
    same tokens and log-probs as copying it to every sample, sampled (rows of prompts of different
    lengths finishing at different steps, so rows leave the batch one by one) and scripted (every
    finish kind). The prefix attention must be what ran: its calls are counted."""
    import chorus.policy.prefix_attention as pa
    from transformers import AttentionInterface

    from chorus.policy.shared_decode import shared_decode

    calls = []
    AttentionInterface.register(pa.NAME, lambda *a, **k: calls.append(1) or pa.shared_prefix_attention(*a, **k))
    try:
        sampled = SamplingParams(max_new_tokens=24, temperature=1.5, seed=7)
        for (model, tok), prompts, params in [(fenced, PROMPTS, sampled), (scripted[:2], S_PROMPTS, GREEDY)]:
            assert pa.applies(model)
            calls.clear()
            once = shared_decode(model, tok, prompts, 5, params, (tok.eos_token_id,))
            assert len(calls) >= model.config.num_hidden_layers  # the prefix path decoded
            copied = shared_decode(model, tok, prompts, 5, params, (tok.eos_token_id,), prefix_once=False)
            assert once[0] == copied[0] and once[2] == copied[2]
            assert len({len(t) for t in once[0]}) > 1  # rows ended at different steps
            assert max(abs(x - y) for a, b in zip(once[1], copied[1]) for x, y in zip(a, b)) < 1e-4
            assert model.config._attn_implementation == "sdpa"  # restored after decoding
    finally:
        AttentionInterface.register(pa.NAME, pa.shared_prefix_attention)


def test_a_prefix_layer_keeps_each_prompt_once_and_moves_only_the_rows_own_positions():
    """SharedPrefixLayer: the prefix is stored per prompt, never per row; a row's suffix follows it
    when rows leave; its attention equals softmax attention over [its prompt's real prefix, its own
    positions], computed here by hand for two prompts x 2 samples, after row 1 has left."""
    from chorus.policy.prefix_attention import SharedPrefixLayer, shared_prefix_attention

    torch.manual_seed(0)
    P, n, Hkv, Lp, d, heads = 2, 2, 1, 3, 4, 2
    pk, pv = torch.randn(P, Hkv, Lp, d), torch.randn(P, Hkv, Lp, d)
    real = torch.tensor([[False, True, True], [True, True, True]])  # prompt 0 is left-padded by one
    layer = SharedPrefixLayer(pk, pv, real, n, capacity=4)
    k1, v1 = torch.randn(P * n, Hkv, 1, d), torch.randn(P * n, Hkv, 1, d)
    layer.update(k1, v1)
    layer.batch_select_indices(torch.tensor([0, 2, 3]))  # row 1 (prompt 0, sample 1) finished
    assert layer.row_prompt.tolist() == [0, 1, 1] and layer.row_slot.tolist() == [0, 0, 1]
    assert torch.equal(layer.keys[:, :, 0], k1[[0, 2, 3], :, 0]) and layer.prefix_k.shape[0] == P
    k2, v2 = torch.randn(3, Hkv, 1, d), torch.randn(3, Hkv, 1, d)
    keys, values = layer.update(k2, v2)
    assert layer.get_seq_length() == Lp + 2

    class Cache:
        layers = [layer]

    class Module:
        layer_idx = 0

    q = torch.randn(3, heads, 1, d)
    out, _ = shared_prefix_attention(Module(), q, keys, values, None, scaling=0.5, chorus_prefix_cache=Cache())
    for r, p in enumerate([0, 1, 1]):
        ks = torch.cat([pk[p, 0][real[p]], keys[r, 0]])
        vs = torch.cat([pv[p, 0][real[p]], values[r, 0]])
        for h in range(heads):  # both query heads share the one key/value head
            want = torch.softmax(q[r, h, 0] @ ks.T * 0.5, -1) @ vs
            assert torch.allclose(out[r, 0, h], want, atol=1e-6)
