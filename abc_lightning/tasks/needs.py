"""What each answer token of a task depends on (:class:`Needs`), and the boolean windows
that follow from it at any size: the dependencies ABS turns into attention masks.

A task states its recurrence once (``Task.needs``); :func:`dependency_windows` and
:func:`dependency_spans` read it for any answer length and source width, so the windows
hold at every length a run is evaluated at.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Needs(NamedTuple):
    """What each answer token depends on: the recurrence a task states, from which ABS builds
    its windows (:func:`dependency_windows`) at any size.

    ``digits (q, R, 2)``: for answer token t, R pairs (operand, digit) of the input it reads,
    digit 0 the least significant. Digit −1 is the token just after the operand (the next
    operator, or EOS), a digit past the operand's top the token just before it (SOS or the
    operator); an operand past the last is EOS. Pairs with operand −1 are unused. A token
    that reads nothing reads EOS, as an anchor.

    ``answers (q, A)``: the earlier answer tokens it reads, by index; −1 is SOS (the
    decoder's first input), anything lower is unused. The token just before it (t − 1, its
    own input) is always open, as in every decoder window.
    """

    digits: torch.Tensor
    answers: torch.Tensor


def _answer_keys(needs: Needs, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The decoder keys of the earlier answer tokens the query ``rows`` read (answer u is the
    decoder's input at u + 1), and where each is read: a real key at or before its row."""
    keys = needs.answers + 1
    return keys, (keys >= 0) & (keys <= rows[:, None])


def dependency_spans(needs: Needs, positions: torch.Tensor, rows: torch.Tensor, n_keys: int) -> tuple[int, slice]:
    """What the query ``rows`` read, as spans: the lowest decoder key (its own input, or an
    earlier answer token of ``needs.answers``), and the slice of source tokens that holds
    every one they read (``positions``, as for :func:`dependency_windows`; EOS for a row
    that reads none). Every key outside them is closed in those rows."""
    keys, used = _answer_keys(needs, rows)
    first = min(int(rows.min()), int(keys[used].min())) if bool(used.any()) else int(rows.min())
    read = positions >= 0
    lo = int(positions[read].min()) if bool(read.any()) else n_keys - 1
    hi = n_keys - 1 if not bool(read.any(dim=1).all()) else int(positions[read].max())  # EOS, the anchor
    return first, slice(lo, hi + 1)


def dependency_windows(needs: Needs, positions: torch.Tensor, rows: torch.Tensor, n_queries: int,
                       n_keys: int, keys: slice | None = None,
                       cross_keys: slice | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean windows ``(self (r, q), cross (r, k))`` for the query ``rows`` from what they
    need: ``positions (r, R)`` are the source tokens of ``needs.digits`` (−1 where unused).
    ``keys``, ``cross_keys``: only those columns of the self and the cross window, when
    given."""
    r = len(rows)
    low, high, _ = (cross_keys or slice(0, n_keys)).indices(n_keys)
    cross = torch.zeros(r, high - low, dtype=torch.bool)
    anchor = ~(positions >= 0).any(dim=1)  # nothing read: EOS, the anchor
    used = (positions >= low) & (positions < high)
    row_of = torch.arange(r)[:, None].expand_as(positions)
    cross[row_of[used], positions[used] - low] = True
    if low <= n_keys - 1 < high:
        cross[anchor, n_keys - 1 - low] = True
    first, stop, _ = (keys or slice(0, n_queries)).indices(n_queries)
    own = torch.zeros(r, stop - first, dtype=torch.bool)
    mine = rows.clamp(max=n_queries - 1)
    inside = (mine >= first) & (mine < stop)
    own[torch.arange(r)[inside], mine[inside] - first] = True
    read, used = _answer_keys(needs, rows)
    used &= (read >= first) & (read < stop)
    row_of = torch.arange(r)[:, None].expand_as(read)
    own[row_of[used], read[used] - first] = True
    return own, cross
