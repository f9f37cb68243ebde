"""Which decoder lines each κ_self keeps, replayed on an ABC run's interpolating weights
(``abc/interpolated.pt``) without training: the lines' offsets (answer positions back) per
decoder layer. Run from the repository root with an ABC fit folder, e.g.
``python results/diagnostics/abc_successor_far_carry/replay_kappa.py
runs/recipe/abc_finetune05_nodrop/table3/runs/abc_successor/fit``.
"""

import sys

import torch

from abc_lightning import load
from abc_lightning.calibration.bias import calibrate_model
from abc_lightning.calibration.options import Lines, resolve

torch.set_num_threads(1)
run = sys.argv[1]
trained = load(f"{run}/checkpoints/last.ckpt")
model = trained.module.model
model.bias_sources.pop("abc")  # the interpolating model: no bias, its own positions
model.set_positional(True)
model.load_state_dict(torch.load(f"{run}/abc/interpolated.pt", weights_only=True)["state_dict"], strict=False)
dm = trained.data
dm.setup("fit")
for kappa in (0.3, 0.5, 0.87, 1.0, 1.5, 2.0):
    recipe = resolve("project", None, Lines(kappa_self=kappa), None, None)
    lines, _ = calibrate_model(model, dm.train_set, dm.task, dm.aligned, recipe, seed=0)
    offsets = [sorted({c + d.c_min for d in layer.directions if d.delta == 1
                       for _, c in (d.values > float("-inf")).nonzero().tolist()}) for layer in lines["decoder"]]
    print(f"κ_self {kappa}: decoder line offsets per layer {offsets}")
