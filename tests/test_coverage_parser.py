"""coverage.dat parsing and the metric, on hand-written snippets with hand-computed values."""
import pytest

from chorus.sim.coverage import (CoverageFormatError, compute_metrics, in_subtree, merge_points,
                                 parse_coverage_text)


def key(f="d.sv", l=1, t="line", o="block", h="TOP.tb.uut", extra=""):
    return f"\x01f\x02{f}\x01l\x02{l}\x01t\x02{t}\x01page\x02v_{t}/m\x01o\x02{o}{extra}\x01h\x02{h}"


def dat(*entries):
    return "# SystemC::Coverage-3\n" + "".join(f"C '{k}' {c}\n" for k, c in entries)


def test_block_expression_toggle_assertion_metrics():
    text = dat(
        (key(l=3, t="line"), 5), (key(l=4, t="line"), 0), (key(l=5, t="branch", o="if"), 2),
        (key(l=5, t="branch", o="else"), 0),                                   # block 2/4
        (key(l=6, t="expr", o="(a==0) => 0"), 1), (key(l=6, t="expr", o="(a==1) => 1"), 0),
        (key(l=6, t="expr", o="(b==1 && c==0) => 1"), 3),                      # expression 2/3
        (key(l=1, t="toggle", o="q[0]:0->1"), 4), (key(l=1, t="toggle", o="q[0]:1->0"), 3),  # covered
        (key(l=1, t="toggle", o="q[1]:0->1"), 1), (key(l=1, t="toggle", o="q[1]:1->0"), 0),  # rose only
        (key(l=1, t="toggle", o="en:0->1"), 0), (key(l=1, t="toggle", o="en:1->0"), 0),      # toggle 1/3
        (key(l=9, t="user", o="cover_full"), 1), (key(l=10, t="user", o="cover_empty"), 0),  # assertion 1/2
    )
    r = compute_metrics(parse_coverage_text(text), "TOP.tb.uut")
    assert r.counts == {"block": [2, 4], "expression": [2, 3], "toggle": [1, 3], "assertion": [1, 2]}
    assert r.metrics["block"] == pytest.approx(50.0)
    assert r.metrics["expression"] == pytest.approx(200 / 3)
    assert r.metrics["toggle"] == pytest.approx(100 / 3)
    assert r.metrics["assertion"] == pytest.approx(50.0)
    assert r.overall == pytest.approx((50 + 200 / 3 + 100 / 3 + 50) / 4)


def test_overall_averages_only_types_with_items():
    text = dat((key(l=3), 1), (key(l=4), 1), (key(l=1, t="toggle", o="a:0->1"), 1),
               (key(l=1, t="toggle", o="a:1->0"), 0))
    r = compute_metrics(parse_coverage_text(text), "TOP.tb.uut")
    assert set(r.metrics) == {"block", "toggle"}
    assert r.overall == pytest.approx((100.0 + 0.0) / 2)


def test_unpacked_arrays_are_left_out_of_toggle():
    text = dat((key(l=2, t="toggle", o="mem[0][0]:0->1"), 0), (key(l=2, t="toggle", o="mem[0][0]:1->0"), 0),
               (key(l=1, t="toggle", o="q[0]:0->1"), 1), (key(l=1, t="toggle", o="q[0]:1->0"), 1))
    pts = parse_coverage_text(text)
    assert compute_metrics(pts, "TOP.tb.uut").counts["toggle"] == [1, 2]
    r = compute_metrics(pts, "TOP.tb.uut", excluded_toggles={("d.sv", 2, "mem")})
    assert r.counts["toggle"] == [1, 1] and r.metrics["toggle"] == 100.0


def test_subtree_filter_separates_two_instances_of_one_module():
    text = dat((key(l=3, h="TOP.tb.u1"), 1), (key(l=4, h="TOP.tb.u1"), 1),
               (key(l=3, h="TOP.tb.u2"), 0), (key(l=4, h="TOP.tb.u2"), 1),
               (key(l=7, h="TOP.tb.u1.sub"), 0),           # u1's child counts for u1
               (key(l=3, h="TOP.tb.u10"), 0),              # a prefix but not a child of u1
               (key(f="tb.sv", l=8, h="TOP.tb"), 1))
    pts = parse_coverage_text(text)
    assert compute_metrics(pts, "TOP.tb.u1").counts["block"] == [2, 3]
    assert compute_metrics(pts, "TOP.tb.u2").counts["block"] == [1, 2]
    assert not in_subtree("TOP.tb.u10", "TOP.tb.u1") and in_subtree("TOP.tb.u1.sub", "TOP.tb.u1")


def test_repeated_keys_and_merge_sum_counts():
    text = dat((key(l=3), 0), (key(l=3), 2))
    pts = parse_coverage_text(text)
    assert len(pts) == 1 and pts[0].count == 2
    merged = merge_points(pts, parse_coverage_text(dat((key(l=3), 5), (key(l=4), 0))))
    assert sorted((p.line, p.count) for p in merged) == [(3, 7), (4, 0)]


def test_comment_with_quotes_and_uncovered_listing_quotes_source():
    text = dat((key(l=2, t="expr", o="((q == {32'sh4{1'h1}})==0) => 0"), 0), (key(l=1), 1))
    pts = parse_coverage_text(text)
    assert pts[0].comment.startswith("((q == {32'sh4")
    r = compute_metrics(pts, "TOP.tb.uut", sources={"d.sv": "module m;\n  assign x = q == '1;\nendmodule\n"})
    assert [(u.metric, u.line, u.source) for u in r.uncovered] == [("expression", 2, "assign x = q == '1;")]


def test_malformed_line_raises_format_error():
    with pytest.raises(CoverageFormatError, match="line 2"):
        parse_coverage_text("# header\nC 'abc' notanumber\n")


def test_nothing_under_root_gives_no_overall():
    r = compute_metrics(parse_coverage_text(dat((key(h="TOP.tb.other"), 1))), "TOP.tb.uut")
    assert r.overall is None and r.metrics == {}
