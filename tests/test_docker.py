"""Structural lint of the Dockerfile (no Docker engine or hadolint on the development machines)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    rows = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(row.split(None, 1)[0].upper(), row.split(None, 1)[1] if " " in row else "") for row in rows]


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(ln.split("==") for ln in lines if "==" in ln and not ln.startswith("#"))


def test_dockerfile_builds_the_tested_versions_and_runs_the_cli():
    steps = instructions()
    assert steps[0][0] == "FROM" and re.fullmatch(r"python:3\.11\.\d+-slim-\w+", steps[0][1]), "tested Python"
    assert ("ENTRYPOINT", '["python", "-m", "abc_lightning"]') in steps
    installs = [arg for op, arg in steps if op == "RUN" and "pip install" in arg]
    assert installs and all("--no-cache-dir" in arg for arg in installs)
    for command in installs[0].split("&&"):  # every install is held to the tested pins
        assert "-c constraints.txt" in command, command
    assert f'"torch=={pins()["torch"]}"' in installs[0]  # the CUDA wheel of the version the tests run
    known = {"FROM", "WORKDIR", "COPY", "RUN", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL"}
    assert {op for op, _ in steps} <= known
    copied = set()
    for op, arg in steps:  # hadolint-style rules
        if op == "COPY":
            sources = arg.split()[:-1]
            copied |= set(sources)
            assert all((ROOT / s).exists() for s in sources), arg
        if op == "RUN":
            assert "sudo" not in arg and not re.search(r"\bcd\b", arg), "use WORKDIR"
        if op == "FROM":
            assert ":latest" not in arg and ":" in arg, "pin the base image"
    assert {"constraints.txt", "abc_lightning", "configs", "sweeps"} <= copied  # what fit, sweep, reproduce read


def test_the_image_records_its_commit_and_the_documented_run_keeps_its_runs():
    steps = instructions()
    assert ("ARG", "GIT_COMMIT=unknown") in steps and ("ENV", "ABC_LIGHTNING_COMMIT=${GIT_COMMIT}") in steps
    docs = (ROOT / "docs" / "logging.md").read_text()  # the README links there for Docker
    assert "--build-arg GIT_COMMIT=$(git rev-parse HEAD)" in docs
    run = next(ln for ln in docs.splitlines() if "docker run" in ln)
    assert '-v "$PWD/runs:/opt/abc_lightning/runs"' in run


def test_run_info_takes_the_baked_commit_outside_a_checkout(monkeypatch, tmp_path):
    import subprocess

    from abc_lightning.callbacks import training

    monkeypatch.setenv("ABC_LIGHTNING_COMMIT", "0123abc")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 128, "", "no repository"))
    assert training.git_commit() == "0123abc"


def test_no_credentials_are_baked_into_the_image():
    text = (ROOT / "Dockerfile").read_text()
    for op, arg in instructions():
        if op in ("ENV", "ARG"):
            assert not re.search(r"(?i)(key|token|secret|password)", arg), arg
    assert "WANDB_API_KEY=" not in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"runs", "wandb", ".venv", ".netrc"} <= set(ignored)
