"""policy=model end to end on a real tiny transformers model against real Verilator."""
import json
import os
import subprocess
import sys

import pytest

from chorus.policy.engines import HFEngine, SamplingParams
from chorus.policy.models import ModelLoadError, load_model
from chorus.protocol.direct import run_direct
from chorus.tasks import load_tasks


def test_engine_returns_token_ids_logprobs_and_finish_reasons(tiny_xs):
    model, tok = load_model("hf", path=str(tiny_xs))
    gens = HFEngine(model, tok).generate(["filename: a.vec\n```vectors\n", "in0="], n=2,
                                          params=SamplingParams(max_new_tokens=12, seed=3))
    assert [len(g) for g in gens] == [2, 2]
    for g in (x for pair in gens for x in pair):
        assert len(g.token_ids) == len(g.logprobs) <= 12 and all(lp <= 0 for lp in g.logprobs)
        assert g.finish_reason in ("eos", "stop", "length") and g.prompt_tokens > 0


def test_direct_protocol_with_and_without_overlap_scores_every_sample(tiny_xs, sim_cfg):
    model, tok = load_model("hf", path=str(tiny_xs))
    tasks = load_tasks("generated", per_family=1, families=["counter"])
    params = SamplingParams(max_new_tokens=24, seed=0)
    for overlap in (True, False):
        rows = run_direct(tasks, HFEngine(model, tok), tok, "vectors", 3, params, sim_cfg, workers=2,
                          overlap=overlap, progress=False)
        assert [(r["task_id"], r["sample"], r["round"]) for r in rows] == [(tasks[0].id, k, 0) for k in range(3)]
        for r in rows:
            assert r["status"] in ("ok", "compile_error", "empty") and r["parse_status"]
            assert r["completion_tokens"] <= 24 and r["finish_reason"] in ("eos", "stop", "length")
            if r["finish_reason"] == "length":
                assert r["reason"].startswith("the generation hit max_new_tokens")


def test_missing_model_path_and_tokenizer_without_eos_are_one_line_errors(tmp_path, tiny_xs):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model("hf", path=str(tmp_path / "nope"))
    broken = tmp_path / "no-eos"
    model, tok = load_model("hf", path=str(tiny_xs))
    model.save_pretrained(broken)
    tok.save_pretrained(broken)
    cfg = json.loads((broken / "tokenizer_config.json").read_text())
    cfg["eos_token"] = None
    (broken / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="has no EOS token"):
        load_model("hf", path=str(broken))


def test_cli_policy_model_writes_rounds_and_parse_status(tmp_path, cache_root, tiny_xs):
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=generated", "tasks.per_family=1",
                        "tasks.families=[fsm]", "policy=model", "model=hf", f"model.path={tiny_xs}",
                        "format=vectors", "n_samples=2", "policy.max_new_tokens=16", "progress=false",
                        f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (tmp_path / "per_task.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {"round", "completion_tokens", "parse_status"} <= set(rows[0])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["pass_at_k"] == {"1": 0.0} and summary["policy"] == "model"


def test_lora_adapters_export_as_plain_merged_weights(tmp_path, tiny_xs):
    import torch
    from transformers import AutoModelForCausalLM

    from chorus.policy.models import add_lora, export_merged

    model, tok = load_model("hf", path=str(tiny_xs))
    peft_model = add_lora(model, r=4)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert 0 < trainable < sum(p.numel() for p in peft_model.parameters()) / 10
    with torch.no_grad():  # make the adapter matter, then check the export reproduces it
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    ids = tok("in0=1 x2", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = peft_model(ids).logits
    out = export_merged(peft_model, tok, tmp_path / "merged")
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    with torch.no_grad():
        assert torch.allclose(reloaded(ids).logits, expected, atol=1e-4)


@pytest.mark.parametrize("overrides, message", [
    (["policy.max_prompt_tokens=200", "policy.max_new_tokens=8"], "needs"),
    (["policy.max_prompt_tokens=4000", "policy.max_new_tokens=512"], "exceeds the model's context"),
])
def test_cli_prompt_and_context_limits_are_one_line_errors(tmp_path, cache_root, tiny_xs, overrides, message):
    env = dict(os.environ, CHORUS_CACHE_DIR=str(cache_root))
    p = subprocess.run([sys.executable, "-m", "chorus.evaluate", "tasks=generated", "tasks.per_family=1",
                        "tasks.families=[fsm]", "policy=model", "model=hf", f"model.path={tiny_xs}",
                        "format=vectors", *overrides, f"hydra.run.dir={tmp_path}"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


def test_a_lora_adapter_over_a_bf16_base_exports_its_merge_in_fp32(tmp_path, tiny_xs):
    import torch
    from safetensors.torch import load_file

    from chorus.policy.models import export_merged

    model, tok = load_model("hf", path=str(tiny_xs), dtype="bfloat16", lora={"r": 4, "alpha": 8})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(1e-3)  # a small task vector: below the bf16 step of most base weights
    layer = "base_model.model.model.layers.0.self_attn.q_proj"
    state = {k: v.clone() for k, v in model.state_dict().items()}
    w, a, b = (state[f"{layer}.{k}.weight"] for k in ("base_layer", "lora_A.default", "lora_B.default"))
    by_hand = w.float() + b @ a * 2.0  # alpha / r
    rounded = (w.float() + b @ a * 2.0).to(torch.bfloat16).float()  # what a merge in bf16 would keep
    assert not torch.equal(rounded, by_hand)
    exported = load_file(str(export_merged(model, tok, tmp_path / "hf") / "model.safetensors"))
    assert {v.dtype for v in exported.values()} == {torch.float32}
    torch.testing.assert_close(exported["model.layers.0.self_attn.q_proj.weight"], by_hand, rtol=0, atol=1e-7)
