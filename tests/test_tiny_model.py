"""The tiny-model factory: builds offline, reloads like a real checkpoint, is deterministic and cached."""
import hashlib
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from chorus.policy import tiny
from chorus.policy.tiny import READY, build_tiny, default_corpus, load_tiny
from chorus.stimulus.aliases import alias_map
from chorus.stimulus.formats import render
from chorus.stimulus.program import parse_vectors
from chorus.tasks.generated import generate_tasks

SV = ("module tb;\n  logic clk = 0;\n  always #5 clk = ~clk;\n  initial begin\n"
      "    in0 = 8'h3c; @(negedge clk);\n    if (out !== 8'hc3) $display(\"bad out=%0h\", out);\n"
      "    $finish;\n  end\nendmodule\n")


@pytest.fixture(scope="module")
def corpus():
    return default_corpus()


@pytest.fixture(scope="module")
def built_s(tmp_path_factory, corpus):
    return build_tiny("s", seed=0, corpus=corpus, cache_root=tmp_path_factory.mktemp("tiny-cache"))


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_saves_a_checkpoint_that_reloads(built_s, corpus):
    assert built_s.name == f"tiny-s-seed0-{tiny.corpus_hash(corpus)}" and built_s.parent.name == "models"
    model = AutoModelForCausalLM.from_pretrained(built_s, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(built_s, local_files_only=True)
    n_params = sum(p.numel() for p in model.parameters())
    assert 3.0e6 <= n_params <= 4.5e6
    assert json.loads((built_s / "chorus_tiny.json").read_text())["params"] == n_params
    cfg = model.config
    assert (cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers) == ("qwen3", 256, 4)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (4, 2, 64)
    assert cfg.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    assert len(tok) <= cfg.vocab_size == 2048
    ids = tok(SV)["input_ids"]
    assert tok.decode(ids) == SV and len(ids) < len(SV) / 2  # lossless, and BPE actually merged
    assert (tok.eos_token, tok.pad_token, tok.bos_token) == ("<|im_end|>", "<|pad|>", "<|endoftext|>")
    chat = tok.apply_chat_template([{"role": "system", "content": "You write testbenches."},
                                    {"role": "user", "content": "Drive in0."}],
                                   tokenize=False, add_generation_prompt=True)
    assert chat == ("<|im_start|>system\nYou write testbenches.<|im_end|>\n"
                    "<|im_start|>user\nDrive in0.<|im_end|>\n<|im_start|>assistant\n")
    # Special tokens are single ids, not spelled out byte by byte.
    assert tok("<|im_start|>user\n")["input_ids"][0] == tok.convert_tokens_to_ids("<|im_start|>")


def test_same_seed_same_model_other_seed_other_weights(tmp_path, corpus):
    a = build_tiny("s", seed=0, corpus=corpus, out_dir=tmp_path / "a")
    b = build_tiny("s", seed=0, corpus=corpus, out_dir=tmp_path / "b")
    c = build_tiny("s", seed=1, corpus=corpus, out_dir=tmp_path / "c")
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert _sha(a / "model.safetensors") == _sha(b / "model.safetensors")
    assert (a / "tokenizer.json").read_bytes() == (c / "tokenizer.json").read_bytes()  # corpus-only
    wa = AutoModelForCausalLM.from_pretrained(a, local_files_only=True).state_dict()
    wc = AutoModelForCausalLM.from_pretrained(c, local_files_only=True).state_dict()
    key = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(wa[key], wc[key])


def test_second_call_reuses_the_cache(built_s, corpus, monkeypatch):
    stamp = {f.name: f.stat().st_mtime_ns for f in built_s.iterdir()}
    # every build trains its tokenizer first: a reuse never does
    monkeypatch.setattr(tiny, "train_tokenizer", lambda *a, **k: pytest.fail("rebuilt a cached model"))
    again = build_tiny("s", seed=0, corpus=corpus, cache_root=built_s.parent.parent)
    assert again == built_s and (built_s / READY).exists()
    assert {f.name: f.stat().st_mtime_ns for f in built_s.iterdir()} == stamp
    assert [p.name for p in built_s.parent.iterdir()] == [built_s.name]  # no temp dir left behind
    model, tok = load_tiny("s", seed=0, corpus=corpus, cache_root=built_s.parent.parent)
    assert model.config.hidden_size == 256 and model.dtype == torch.float32
    assert model.config._attn_implementation == "sdpa" and tok.eos_token == "<|im_end|>"


def test_a_few_sft_steps_lower_the_loss(built_s, corpus):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tok = load_tiny("s", seed=0, corpus=corpus, cache_root=built_s.parent.parent)
        # Generated SFT-style data: the first lines of strong vectors and body stimulus.
        tasks = generate_tasks(seed=0, per_family=1, families=["counter", "fsm"])
        lines = []
        for task in tasks:
            vectors = task.meta["programs"]["strong"]
            body = render("body", task, parse_vectors(vectors, alias_map(task)))
            lines += ["\n".join(vectors.splitlines()[:6]), "\n".join(body.splitlines()[:4])]
        batch = tok(lines, padding=True, return_tensors="pt")
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        losses = []
        for _ in range(20):
            loss = model(**batch, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            final = model(**batch, labels=labels).loss.item()
        assert final < 0.7 * losses[0], losses
    finally:
        torch.set_num_threads(threads)


def test_unknown_size_is_a_one_line_error(tmp_path):
    for call in (lambda: build_tiny("xl", cache_root=tmp_path), lambda: load_tiny("xl", cache_root=tmp_path)):
        with pytest.raises(ValueError, match=r"unknown tiny model size 'xl'; choose one of \['m', 's', 'xs'\]") as e:
            call()
        assert "\n" not in str(e.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_pretraining_reports_its_progress_with_an_eta(tmp_path, corpus, caplog):
    """The base's pretraining (minutes on a laptop, in the pipeline's prepare) is reported as it goes:
    its first step, then at most every 10 s, and its last, each with an ETA."""
    import logging

    from chorus.tracking.progress import throttled

    with caplog.at_level(logging.INFO, logger="chorus.progress"):
        build_tiny("xs", seed=0, corpus=corpus, cache_root=tmp_path, pretrain_steps=5, pretrain_corpus=corpus[:10])
    lines = [r.getMessage() for r in caplog.records if r.name == "chorus.progress"]
    assert lines[0] == "pretraining the tiny base 1/5, ETA ?" and lines[-1] == "pretraining the tiny base 5/5, ETA 0s"
    seen = []
    on_step = throttled(lambda phase, done, total: seen.append(done), "x")
    for done in range(1, 6):
        on_step(done, 5)
    assert seen == [1, 5]  # within 10 s: the first and the last step only


def test_pretraining_lowers_the_lm_loss_and_is_part_of_the_recipe(tmp_path, corpus, monkeypatch):
    """pretrain_steps > 0: the initialised model is trained as an LM on the given corpus; its loss
    falls, its weights differ from the plain build of the same seed, the run repeats exactly, and
    the cache tells a pretrained base from a plain one (and from another number of steps)."""
    from chorus.policy.pretrain import PretrainSpec, lr_at, pack

    texts = corpus[:40]
    plain = build_tiny("xs", seed=0, corpus=corpus, cache_root=tmp_path)
    base = build_tiny("xs", seed=0, corpus=corpus, cache_root=tmp_path, pretrain_steps=40, pretrain_corpus=texts)
    assert base != plain and "-pt40-" in base.name
    meta = json.loads((base / "chorus_tiny.json").read_text())
    assert meta["pretrain"]["steps"] == 40 and meta["pretrain_loss_last"] < 0.8 * meta["pretrain_loss_first"]
    w0 = AutoModelForCausalLM.from_pretrained(plain).state_dict()
    w1 = AutoModelForCausalLM.from_pretrained(base).state_dict()
    assert any(not torch.equal(w0[k], w1[k]) for k in w0)
    again = build_tiny("xs", seed=0, corpus=corpus, out_dir=tmp_path / "again", pretrain_steps=40,
                       pretrain_corpus=texts)
    w2 = AutoModelForCausalLM.from_pretrained(again).state_dict()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)  # same seed, same corpus, same machine: same base
    # reused, not rebuilt; a different recipe in the same dir is refused with the fix named
    monkeypatch.setattr(tiny, "train_tokenizer", lambda *a, **k: pytest.fail("rebuilt a cached base"))
    assert build_tiny("xs", seed=0, corpus=corpus, cache_root=tmp_path, pretrain_steps=40,
                      pretrain_corpus=texts) == base
    with pytest.raises(ValueError, match="different tiny model"):
        build_tiny("xs", seed=0, corpus=corpus, out_dir=base, pretrain_steps=20, pretrain_corpus=texts)
    # the packed blocks hold the texts in order, each ended by <|endoftext|>; the schedule warms up
    tok = AutoTokenizer.from_pretrained(plain)
    blocks = pack(tok, ["module a; endmodule", "in0=1 x4"], seq_len=4)
    flat = tok.decode(blocks.flatten().tolist())
    assert flat in "module a; endmodule<|endoftext|>in0=1 x4<|endoftext|>" and blocks.shape[1] == 4
    spec = PretrainSpec(steps=100, lr=1e-3, warmup=10)
    assert lr_at(0, spec) == pytest.approx(1e-4) and lr_at(9, spec) == pytest.approx(1e-3)
    assert lr_at(99, spec) == pytest.approx(1e-4, rel=0.05)
    with pytest.raises(ValueError, match="fewer than one block"):
        pack(tok, ["x"], seq_len=4096)
