# GPU image for abc_lightning. Build: docker build -t abc_lightning .
# Run:   docker run --gpus all -e WANDB_API_KEY abc_lightning fit --config configs/abs_parity.yaml
# W&B credentials come from the environment at run time; none are baked into the image.
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

WORKDIR /opt/abc_lightning
COPY pyproject.toml README.md ./
COPY abc_lightning ./abc_lightning
COPY configs ./configs
# torch comes from the base image; pip keeps it because pyproject only asks for torch>=2.2.
RUN pip install --no-cache-dir .

ENTRYPOINT ["python", "-m", "abc_lightning"]
CMD ["--help"]
