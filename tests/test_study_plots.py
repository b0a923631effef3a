"""plots.study_rows: each row's per-seed intervals and its pooled one, where study.json puts them."""
from matplotlib.container import ErrorbarContainer

from chorus.analysis.plots import study_rows


def test_each_row_draws_every_seeds_interval_and_the_pooled_one(tmp_path):
    rows = {"h1": {"per_seed": {"seed0": {"estimate": 2.0, "lo": 1.0, "hi": 4.0},
                                "seed1": {"estimate": -1.0, "lo": -3.0, "hi": 0.5}},
                   "pooled": {"estimate": 0.5, "lo": -6.0, "hi": 7.0}},
            "h2": {"per_seed": {"seed0": {"estimate": 5.0, "lo": 4.0, "hi": 6.0}},  # seed1 lacks it
                   "pooled": {"estimate": 5.0, "lo": 3.0, "hi": 7.0}},
            "pattern_difference": {"per_seed": {}, "pooled": {"estimate": 9.0, "lo": 8.0, "hi": 10.0}}}
    fig = study_rows({"rows": rows, "seeds": ["seed0", "seed1"], "design": 2}, path=tmp_path / "rows.png")
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2 + 1 + 1 + 1  # h2 first (rows reversed, y = 0), then h1; pattern rows left out
    spans = sorted((round(b.lines[0].get_xdata()[0], 6), tuple(b.lines[2][0].get_segments()[0][:, 0])) for b in bars)
    assert spans == [(-1.0, (-3.0, 0.5)), (0.5, (-6.0, 7.0)), (2.0, (1.0, 4.0)), (5.0, (3.0, 7.0)), (5.0, (4.0, 6.0))]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["h2", "h1"]
    # each series once, seed1 too though the first row (h2) has none of it
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["pooled", "seed0", "seed1"]
    assert (tmp_path / "rows.png").stat().st_size > 0
