"""A tiny SFT run on generated, simulator-validated examples lowers the loss and exports a checkpoint."""
from transformers import AutoModelForCausalLM

from chorus.sft.data import build_examples
from chorus.sft.run import train_sft
from chorus.tasks import load_tasks


def test_tiny_sft_lowers_the_loss_and_exports(tmp_path, tiny_xs, sim_cfg):
    tasks = load_tasks("generated", per_family=1, families=["counter", "alu"])
    examples = build_examples(tasks, "vectors", sim_cfg, workers=2)
    out = train_sft(str(tiny_xs), examples, tmp_path / "sft", steps=16, batch_size=2, lr=3e-3, warmup_steps=2)
    losses = out["losses"]
    assert len(losses) == 16
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.6 * first, losses
    reloaded = AutoModelForCausalLM.from_pretrained(out["checkpoint"])
    assert reloaded.config.hidden_size == 128
