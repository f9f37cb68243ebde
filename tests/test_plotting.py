from matplotlib.figure import Figure

from abc_lightning.plotting import accuracy_curves


def test_accuracy_curves_one_panel_per_task_one_line_per_scheme():
    rows = [{"length": n, "accuracy": 100.0 if n <= 6 else 0.0} for n in range(1, 61)]
    fig = accuracy_curves({"successor": {"Vanilla": rows, "RoPE": rows}, "addition": {"Vanilla": rows}})
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["successor", "addition"]
    assert len(panels[0].get_lines()) == 2 + 1  # two schemes and the L_int marker
    xs, ys = panels[0].get_lines()[0].get_data()
    assert list(xs[:7]) == list(range(1, 8)) and ys[5] == 100.0 and ys[6] == 0.0


def test_accuracy_curves_give_a_label_one_colour_in_every_panel_and_the_legend():
    rows = [{"length": n, "accuracy": 50.0} for n in range(1, 5)]
    fig = accuracy_curves({"successor": {"Vanilla": rows, "ALiBi": rows, "ABC": rows},
                           "nx1": {"Vanilla": rows, "ABC": rows}})
    panels = [ax for ax in fig.axes if ax.get_title()]
    colour = {line.get_label(): line.get_color() for line in panels[0].get_lines() if not line.get_label().startswith("_")}
    assert len(set(colour.values())) == 3
    for line in panels[1].get_lines():
        if not line.get_label().startswith("_"):
            assert line.get_color() == colour[line.get_label()]  # ABC keeps its colour without ALiBi beside it
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["Vanilla", "ALiBi", "ABC"]
    assert [h.get_color() for h in legend.legend_handles] == [colour[k] for k in ("Vanilla", "ALiBi", "ABC")]
