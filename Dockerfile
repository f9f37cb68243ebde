# GPU image for abc_lightning on the tested versions: Python 3.11 and every pin of constraints.txt.
# Build: docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t abc_lightning .
# Run:   docker run --gpus all -e WANDB_API_KEY -v "$PWD/runs:/opt/abc_lightning/runs" \
#            abc_lightning fit --config configs/abs.yaml --data=Parity
# Runs are written to /opt/abc_lightning/runs (mount it, as above, or they go with the container);
# `reproduce` writes to /opt/abc_lightning/results (mount "$PWD/results" there).
# W&B credentials come from the environment at run time; none are baked into the image.
# BASE: any image with Python 3.11 and pip as `python` (e.g. one made locally, tests/test_docker.py).
ARG BASE=python:3.11.7-slim-bookworm
FROM ${BASE}

# The image has no .git: the commit it was built from is recorded in every run_info.json.
ARG GIT_COMMIT=unknown
ENV ABC_LIGHTNING_COMMIT=${GIT_COMMIT}
LABEL org.opencontainers.image.revision=${GIT_COMMIT}

WORKDIR /opt/abc_lightning
COPY pyproject.toml README.md constraints.txt ./
COPY abc_lightning ./abc_lightning
# torch first, on its own: from PyPI, torch==2.13.0 for Linux x86_64 is the CUDA build (its CUDA
# libraries come as pip packages), so the image runs the exact version the tests run.
# PIP_FIND_LINKS (a build argument, empty by default) can offer a local wheel, such as a CPU build.
ARG PIP_FIND_LINKS=
RUN pip install --no-cache-dir -c constraints.txt "torch==2.13.0" \
    && pip install --no-cache-dir -c constraints.txt .
COPY configs ./configs
COPY sweeps ./sweeps

ENTRYPOINT ["python", "-m", "abc_lightning"]
CMD ["--help"]
