"""Structural lint of the Dockerfile (no Docker engine or hadolint on the development machines)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    rows = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(row.split(None, 1)[0].upper(), row.split(None, 1)[1] if " " in row else "") for row in rows]


def test_dockerfile_builds_on_an_official_pytorch_cuda_image_and_runs_the_cli():
    steps = instructions()
    assert steps[0][0] == "FROM" and re.fullmatch(r"pytorch/pytorch:[\w.]+-cuda[\w.]+-cudnn\d+-(runtime|devel)", steps[0][1])
    assert ("ENTRYPOINT", '["python", "-m", "abc_lightning"]') in steps
    assert any(op == "RUN" and "pip install" in arg and "--no-cache-dir" in arg for op, arg in steps)
    known = {"FROM", "WORKDIR", "COPY", "RUN", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL"}
    assert {op for op, _ in steps} <= known
    for op, arg in steps:  # hadolint-style rules
        if op == "COPY":
            sources = arg.split()[:-1]
            assert all((ROOT / s).exists() for s in sources), arg
        if op == "RUN":
            assert "sudo" not in arg and not re.search(r"\bcd\b", arg), "use WORKDIR"
        if op == "FROM":
            assert ":latest" not in arg and ":" in arg, "pin the base image"


def test_no_credentials_are_baked_into_the_image():
    text = (ROOT / "Dockerfile").read_text()
    for op, arg in instructions():
        if op in ("ENV", "ARG"):
            assert not re.search(r"(?i)(key|token|secret|password)", arg), arg
    assert "WANDB_API_KEY=" not in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"runs", "wandb", ".venv", ".netrc"} <= set(ignored)
