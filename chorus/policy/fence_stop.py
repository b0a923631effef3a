"""Stop a sequence once its completion closes a fenced block, at O(1) host work per token.

`fence_closed(text)` is the rule. Evaluating it on every row's whole decoded completion at every
decode step costs O(batch x length) per step (64 x 512 on a GPU: tens of ms of tokenizer work and
per-row device->host copies per step). `FenceStop` gives the same answer at the same token while
running the rule only on rows where it can have turned true. Per row it keeps counts read from each
new token's own decoded piece (cached per token id):

- `markers`: backticks and tildes so far. Two fence lines each start with ``` or ~~~, so the rule
  needs at least 6 (ASCII characters decode the same alone as in context).
- `last_line_markers`: backticks and tildes on the last line that has a non-blank character. The rule
  needs `text.rstrip()` to end with a whole fence line, which starts with 3 of them, so that line
  holds at least 3. A line break missed because it was split over two tokens (a multi-byte one) only
  merges two lines here, which can only add markers: still a necessary condition.
- a piece that is only whitespace (or empty: special tokens are skipped) leaves `rstrip()` and every
  stripped line as they were, so it cannot turn the rule true.

Rows passing all three are checked with the rule on their full decoded completion, so a stop happens
exactly where the full check would put it; the rest are provably not closed yet.
"""
from __future__ import annotations

FENCES = ("```", "~~~")


def fence_closed(text: str) -> bool:
    fences = [ln for ln in text.splitlines() if ln.strip().startswith(FENCES)]
    return len(fences) >= 2 and text.rstrip().endswith(fences[-1].strip())


def _markers(s: str) -> int:
    return s.count("`") + s.count("~")


class FenceStop:
    """Per-row fence state over a batch; `update` takes each row's newest token ids."""

    def __init__(self, tokenizer, rows: int):
        self.tok = tokenizer
        self.ids: list[list[int]] = [[] for _ in range(rows)]
        self.markers = [0] * rows
        self.line_markers = [0] * rows  # the current (unterminated) line
        self.line_blank = [True] * rows
        self.last_line_markers = [0] * rows  # the last line with a non-blank character
        self.closed = [False] * rows
        self.full_checks = 0  # how often the rule ran on a whole completion (the test reads it)
        self._pieces: dict[int, tuple[list[tuple[str, bool]], int, bool]] = {}

    def _piece(self, token: int):
        """(segments of the token's text, each with `ends a line`), its marker count, whitespace-only."""
        cached = self._pieces.get(token)
        if cached is None:
            text = self.tok.decode([token], skip_special_tokens=True)
            segments = [(s, s != s.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"))
                        for s in text.splitlines(keepends=True)]
            cached = self._pieces[token] = (segments, _markers(text), not text.strip())
        return cached

    def update(self, tokens: list[int], rows: list[int] | None = None) -> list[bool]:
        """Append one token per row (to `rows` only when given: the rows still decoding); returns which
        rows' completions now close a fence."""
        for row, token in zip(range(len(tokens)) if rows is None else rows, tokens):
            self.ids[row].append(token)
            if self.closed[row]:
                continue
            segments, markers, blank = self._piece(token)
            self.markers[row] += markers
            for text, ends_line in segments:
                self.line_markers[row] += _markers(text)
                self.line_blank[row] = self.line_blank[row] and not text.strip()
                if not self.line_blank[row]:
                    self.last_line_markers[row] = self.line_markers[row]
                if ends_line:
                    self.line_markers[row], self.line_blank[row] = 0, True
            if blank or self.markers[row] < 6 or self.last_line_markers[row] < 3:
                continue
            self.full_checks += 1
            self.closed[row] = fence_closed(self.tok.decode(self.ids[row], skip_special_tokens=True))
        return list(self.closed)
