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
    fig.tight_layout()
    return fig


def attention_heatmaps(weights: torch.Tensor, title: str = "") -> Figure:
    """Per-head heatmaps of attention weights ``(H, q, k)`` (queries down, keys across)."""
    return bias_heatmaps(weights, title)
