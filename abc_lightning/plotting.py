"""Pure plotting functions: result rows in, matplotlib Figure out. Saving is the caller's job."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on servers; callers only save or log figures
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
import torch  # noqa: E402


def accuracy_curves(curves: dict[str, dict[str, list[dict]]], train_length: int = 6, title: str = "") -> Figure:
    """Accuracy-versus-length curves in the style of the paper's Figure 1.

    Args:
        curves: ``{task: {label: [{"length": L, "accuracy": percent}, …]}}``; one panel per
            task, one line per label.
        train_length: drawn as a dotted vertical line (L_int).
    """
    tasks = list(curves)
    # one colour per label across every panel, so the shared legend is right for panels
    # that lack some of the labels
    labels = list(dict.fromkeys(label for task in tasks for label in curves[task]))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {label: cycle[i % len(cycle)] for i, label in enumerate(labels)}
    fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(4.2 * max(len(tasks), 1), 3.6), squeeze=False,
                             sharey=True)
    for ax, task in zip(axes[0], tasks):
        for label, rows in curves[task].items():
            rows = sorted(rows, key=lambda r: r["length"])
            ax.plot([r["length"] for r in rows], [r["accuracy"] for r in rows], label=label, linewidth=1.4,
                    color=colour[label])
        ax.axvline(train_length, color="grey", linestyle=":", linewidth=1)
        ax.set_title(task)
        ax.set_xlabel("length (digits)")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("exact-match accuracy (%)")
    handles = [plt.Line2D([], [], color=colour[label], linewidth=1.4) for label in labels]
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), frameon=False, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def bias_heatmaps(bias: torch.Tensor, title: str = "") -> Figure:
    """Per-head heatmaps of a bias ``(H, q, k)`` like the paper's Figures 10–11.

    Each head has its own colour scale; closed (−inf) cells are left white and a
    transparent head (all 0) is painted black, as in the paper.
    """
    heads = bias.shape[0]
    cols = min(heads, 4)
    rows = (heads + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for h, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if h >= heads:
            continue
        b = bias[h].detach().float().cpu()
        closed = torch.isinf(b)
        if not closed.any() and (b == 0).all():
            ax.imshow(torch.zeros_like(b), cmap="gray", vmin=0, vmax=1, aspect="auto")
            ax.set_title(f"head {h + 1}: transparent", fontsize=9)
            continue
        shown = b.masked_fill(closed, float("nan")).numpy()
        image = ax.imshow(shown, cmap="viridis", aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax, fraction=0.046)
        ax.set_title(f"head {h + 1}", fontsize=9)
    if title:
        fig.suptitle(title)
    # fixed margins in inches: tight_layout would lay the figure out by drawing it once
    # more, which made each of these figures take about twice as long (they are drawn at
    # every heatmap validation, a dozen or two per fit)
    height = 2.6 * rows
    fig.subplots_adjust(left=0.02, right=0.97, bottom=0.1 / height, top=1 - 0.55 / height,
                        wspace=0.25, hspace=0.45 / 2.6 * 2)
    return fig


def attention_heatmaps(weights: torch.Tensor, title: str = "") -> Figure:
    """Per-head heatmaps of attention weights ``(H, q, k)`` (queries down, keys across)."""
    return bias_heatmaps(weights, title)


def _ordered(values) -> list:
    """Distinct values, numbers in numeric order and anything else as text."""
    distinct = list(dict.fromkeys(values))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct)
    return sorted(distinct) if numeric else sorted(distinct, key=str)


def sweep_heatmaps(rows: list[dict], axes: list[str], metric: str, title: str = "", max_levels: int = 8) -> Figure:
    """A sweep's ``metric`` over its swept ``axes``, one figure for a person to scan.

    Two or more axes of at most ``max_levels`` values each: a heatmap of the first two
    axes, one panel (facet) per combination of the others. One axis: bars. Axes with more
    values (random search): one scatter panel per axis. Missing runs are blank cells.
    """
    import itertools

    import numpy as np

    value = {tuple(r.get(a) for a in axes): r.get(metric) for r in rows}
    levels = {a: _ordered(r.get(a) for r in rows) for a in axes}
    if any(len(levels[a]) > max_levels for a in axes):
        fig, panels = plt.subplots(1, len(axes), figsize=(3.6 * len(axes), 3.2), squeeze=False, sharey=True)
        for ax, name in zip(panels[0], axes):
            points = [(r.get(name), r.get(metric)) for r in rows if r.get(metric) is not None]
            ax.scatter([p[0] for p in points], [p[1] for p in points], s=18)
            ax.set_xlabel(name.rsplit(".", 1)[-1])
            ax.set_ylim(-3, 103)
            ax.grid(alpha=0.3)
        panels[0][0].set_ylabel(metric)
    elif len(axes) == 1:
        fig, ax = plt.subplots(figsize=(max(3.5, 0.7 * len(levels[axes[0]])), 3.2))
        xs = levels[axes[0]]
        ax.bar([str(x) for x in xs], [value.get((x,)) or 0.0 for x in xs])
        ax.set_xlabel(axes[0].rsplit(".", 1)[-1])
        ax.set_ylabel(metric)
        ax.set_ylim(0, 103)
    else:
        x_axis, y_axis, rest = axes[0], axes[1], axes[2:]
        facets = list(itertools.product(*(levels[a] for a in rest))) or [()]
        cols = min(len(facets), 4)
        nrows = (len(facets) + cols - 1) // cols
        xs, ys = levels[x_axis], levels[y_axis]
        size = (0.7 * len(xs) * cols + 2.2 * cols, 0.5 * len(ys) * nrows + 1.8 * nrows)
        fig, panels = plt.subplots(nrows, cols, figsize=size, squeeze=False, layout="constrained")
        for ax in panels.flat[len(facets):]:
            ax.set_axis_off()
        for ax, facet in zip(panels.flat, facets):
            grid = np.full((len(ys), len(xs)), np.nan)
            for i, y in enumerate(ys):
                for j, x in enumerate(xs):
                    v = value.get((x, y, *facet))
                    grid[i, j] = np.nan if v is None else v
            image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
            for i in range(len(ys)):
                for j in range(len(xs)):
                    if not np.isnan(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                                color="white" if grid[i, j] < 60 else "black")
            ax.set_xticks(range(len(xs)), [str(x) for x in xs], fontsize=8)
            ax.set_yticks(range(len(ys)), [str(y) for y in ys], fontsize=8)
            ax.set_xlabel(x_axis.rsplit(".", 1)[-1])
            ax.set_ylabel(y_axis.rsplit(".", 1)[-1])
            if rest:
                ax.set_title(", ".join(f"{a.rsplit('.', 1)[-1]}={v}" for a, v in zip(rest, facet)), fontsize=9)
        fig.colorbar(image, ax=panels.ravel().tolist(), fraction=0.03)
    if title:
        fig.suptitle(title)
    return fig
