"""REPORT.md's OPD diagnostics: per-step routing, margin, KL, truncation; the validation curve and its choice."""
import json

from chorus.analysis.opd_diagnostics import diagnostics_markdown, opd_steps, selection_curve


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_per_step_diagnostics_and_the_chosen_validation_step(tmp_path):
    opd = tmp_path / "opd"
    opd.mkdir()
    write(opd / "steps.jsonl", [
        {"step": 1, "routed_fraction": 0.25, "samples_trained": 8, "routed_margin_mean": 0.5, "kl_fam0": 0.31,
         "truncated_fraction": 0.125, "compile_rate": 0.75, "pass_rate": 0.5, "reward_mean": 0.4},
        {"step": 2, "routed_fraction": 0.0, "samples_trained": 0, "truncated_fraction": 0.0, "compile_rate": 1.0,
         "pass_rate": 0.625, "reward_mean": 0.6}])
    write(opd / "selection.jsonl", [{"step": 0, "pass_rate": 0.40}, {"step": 1, "pass_rate": 0.55},
                                    {"step": 2, "pass_rate": 0.55}])
    steps = opd_steps(opd)
    assert list(steps.columns) == ["step", "routed", "sequences trained", "margin (teacher - student)", "truncated",
                                   "compiles", "student pass", "KL to fam0"]
    assert steps["routed"].tolist() == [0.25, 0.0] and steps["sequences trained"].tolist() == [8, 0]
    assert steps["margin (teacher - student)"].isna().tolist() == [False, True]  # nothing routed at step 2
    curve = selection_curve(opd)
    assert curve["chosen"].tolist() == [False, True, False]  # 0.55 twice: the earlier step
    dapo = tmp_path / "dapo"  # a DAPO run (no routing) with a validation curve: the curve only
    dapo.mkdir()
    write(dapo / "steps.jsonl", [{"step": 1, "reward_mean": 0.2}])
    write(dapo / "selection.jsonl", [{"step": 0, "pass_rate": 0.5}, {"step": 3, "pass_rate": 0.25}])
    assert opd_steps(dapo).empty and opd_steps(tmp_path / "nothing").empty
    md = "\n".join(diagnostics_markdown({"opd": opd, "own": dapo, "none": tmp_path / "nothing"},
                                        tmp_path / "curves.png"))
    assert "### opd: per step" in md and "### own: per step" not in md
    rows = [line.split("|")[1:-1] for line in md.splitlines() if line.startswith("|") and "---" not in line]
    assert [c.strip() for c in rows[1]] == ["1", "0.250", "8", "0.500", "0.125", "0.750", "0.500", "0.310"]
    assert [c.strip() for c in rows[2]][:3] == ["2", "0.000", "0"]  # counts stay whole beside a NaN margin
    assert "opd: validation Pass@1 by step (0: 40.0, 1: 55.0, 2: 55.0); chosen: step 1." in md
    assert "own: validation Pass@1 by step (0: 50.0, 3: 25.0); chosen: step 0." in md
    assert (tmp_path / "curves.png").stat().st_size > 0 and "![validation curves](curves.png)" in md
    assert diagnostics_markdown({"none": tmp_path / "nothing"}) == []
