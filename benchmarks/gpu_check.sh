#!/usr/bin/env bash
# The README's main command on one CUDA GPU, then its checkpoint tested at 60 and 600 digits
# and used through the Python API on the GPU. Logs go to $1 (default runs/gpu_check).
#   bash benchmarks/gpu_check.sh [LOG_FOLDER]
set -uo pipefail
out=${1:-runs/gpu_check}
mkdir -p "$out"
py=${PYTHON:-python3}
nvidia-smi -L | tee "$out/gpu.txt"
$py -c "import torch, lightning; print('torch', torch.__version__, 'lightning', lightning.__version__, torch.cuda.get_device_name(0))" | tee -a "$out/gpu.txt"

start=$(date +%s)
$py -m abc_lightning fit --config configs/abs_parity.yaml --trainer.accelerator=gpu --trainer.devices=1 \
    --wandb.mode=disabled --trainer.logger.init_args.save_dir="$out/runs" >"$out/fit.log" 2>&1
echo "fit: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/gpu.txt"
ckpt=$(ls "$out"/runs/abs/version_*/checkpoints/last.ckpt | tail -1)

start=$(date +%s)
$py -m abc_lightning test --ckpt_path "$ckpt" --data.test_lengths=[60,600] --data.test_samples=1000 \
    --trainer.accelerator=gpu --trainer.devices=1 --trainer.logger.init_args.save_dir="$out/runs" \
    >"$out/test.log" 2>&1
echo "test at 60 and 600 digits: exit $? in $(( $(date +%s) - start )) s" | tee -a "$out/gpu.txt"
grep "^|" "$out/test.log" | tail -6 | tee -a "$out/gpu.txt"

$py - "$ckpt" <<'EOF' 2>&1 | tee -a "$out/gpu.txt"
import sys, time
from abc_lightning import load
m = load(sys.argv[1], device="cuda")
print("api on", next(m.module.parameters()).device, "predict 1011 and 600 ones:", m.predict(["1011", "1" * 600]))
t = time.time()
row = m.evaluate(lengths=[600], samples=500)[0]
print(f"api evaluate at 600 digits on cuda: {row['accuracy']}% of {row['samples']}, worst {row['worst']}%, "
      f"{time.time() - t:.1f} s")
EOF
