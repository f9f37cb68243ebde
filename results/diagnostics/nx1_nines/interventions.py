"""Is the global encoder's self-attention the channel of N×1's long-run misses, and can a
test-time change of that attention remove them?

For the N×1 + T=3 runs of Table 1's seeds 2 and 3 (both miss long runs of equal carries), at
6, 60 and 600 digits (1,000 random inputs and the worst-case set), three versions of each
trained model:

- ``model``: the model as trained;
- ``temperature s``: the encoder's attention logits multiplied by s (its queries scaled),
  the log-length scaling of attention at test time (s = 1.5, 2, 2.8; ln of the 600-digit
  input's 1,207 source tokens over ln of the 6-digit frame's 19 is 2.4);
- ``constant``: the encoder self-attention's output replaced at every position by one vector,
  its mean over the positions of 2,000 random 6-digit inputs, so that nothing the encoder
  writes depends on the rest of the input.

It also prints, per head, the share of a digit query's weight on keys within 3 positions
(all 9s and a random input of 6, 60 and 600 digits), which is about 7 / (source tokens)
where the attention is spread evenly.

    python -m abc_lightning reproduce table1 --only abs_nx1 --seeds 2 3 --results <folder>
    OMP_NUM_THREADS=1 python results/diagnostics/nx1_nines/interventions.py <folder>/table1/runs
"""
import json
import random
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs = sys.argv[1]


def local_share(model, text: str) -> list[float]:
    weights = model.attention(text)["encoder"][0]  # (heads, queries, keys)
    n = weights.shape[-1]
    i = torch.arange(n)
    near = ((i[:, None] - i[None, :]).abs() <= 3).float()
    rows = slice(2, n - 1)  # the digit and multiplier tokens between the start and end marks
    return [round(float((weights[h, rows] * near[rows]).sum(-1).mean()), 3) for h in range(weights.shape[0])]


def row(model, mode: str, length: int) -> dict:
    r = model.evaluate(lengths=[length], samples=1000)[0]
    return {"mode": mode, "length": length, "accuracy": r["accuracy"], "worst": r["worst"],
            "missed": {k: v for k, v in r["worst_families"].items() if v < 100}}


for seed in (2, 3):
    model = load(f"{runs}/abs_nx1.seed{seed}/fit/checkpoints/best.ckpt")
    rng = random.Random(seed)
    for n in (6, 60, 600):
        number = rng.choice("123456789") + "".join(rng.choice("0123456789") for _ in range(n - 1))
        print(f"seed {seed}, {n} digits, weight within 3 positions per head: all 9s",
              local_share(model, "9" * n + "*9"), "random", local_share(model, f"{number}*7"), flush=True)
    attn = model.module.model.encoder[0].attn
    weight, bias = attn.q_proj.weight.detach().clone(), attn.q_proj.bias.detach().clone()
    for s in (1.0, 1.5, 2.0, 2.8):
        with torch.no_grad():
            attn.q_proj.weight.copy_(weight * s)
            attn.q_proj.bias.copy_(bias * s)
        for n in (6, 60, 600):
            print(json.dumps({"seed": seed, **row(model, "model" if s == 1 else f"temperature {s}", n)}), flush=True)
    with torch.no_grad():
        attn.q_proj.weight.copy_(weight)
        attn.q_proj.bias.copy_(bias)
    outputs = []
    hook = attn.register_forward_hook(lambda m, i, o: outputs.append(o[0].reshape(-1, o[0].shape[-1])))
    with torch.inference_mode():
        model.evaluate(lengths=[6], samples=2000, worst_case=False)
    hook.remove()
    mean = torch.cat(outputs).mean(0)
    hook = attn.register_forward_hook(lambda m, i, o: (mean.expand_as(o[0]).clone(), o[1]))
    for n in (6, 60, 600):
        print(json.dumps({"seed": seed, **row(model, "constant", n)}), flush=True)
    hook.remove()
