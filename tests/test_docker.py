"""The Dockerfile: a structural lint, and (slow, where podman is installed) a real build and run."""

import re
from pathlib import Path

import pytest

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
    assert steps[0][0] == "ARG" and re.fullmatch(r"BASE=python:3\.11\.\d+-slim-\w+", steps[0][1]), "tested Python"
    assert steps[1] == ("FROM", "${BASE}")  # the base is a build argument, by default the tested Python
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
        if op == "ARG" and arg.startswith("BASE="):
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

    from abc_lightning.runs import provenance

    monkeypatch.setenv("ABC_LIGHTNING_COMMIT", "0123abc")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 128, "", "no repository"))
    assert provenance.git_commit() == "0123abc"


def test_no_credentials_are_baked_into_the_image():
    text = (ROOT / "Dockerfile").read_text()
    for op, arg in instructions():
        if op in ("ENV", "ARG"):
            assert not re.search(r"(?i)(key|token|secret|password)", arg), arg
    assert "WANDB_API_KEY=" not in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"runs", "wandb", ".venv", ".netrc"} <= set(ignored)


@pytest.mark.slow
def test_the_image_builds_and_runs_the_debug_fit(tmp_path):
    """Build the image with buildah (from a local base where no registry can be reached:
    scripts/docker_base.sh) and run the debug fit in it, runs/ on a volume. Chroot
    isolation, since a container runtime may not be allowed here. Skipped where there is no
    buildah, or no base and no way to make one."""
    import os
    import shutil
    import subprocess

    buildah = shutil.which("buildah")
    if buildah is None:
        pytest.skip("no buildah here")
    base = os.environ.get("ABC_LIGHTNING_DOCKER_BASE", "localhost/abc-lightning-base:bookworm")
    if subprocess.run([buildah, "inspect", "--type", "image", base], capture_output=True).returncode:
        if not (shutil.which("debootstrap") and shutil.which("podman")) or os.geteuid() != 0:
            pytest.skip(f"no base image {base}, and no debootstrap and podman as root to make one")
        subprocess.run(["bash", str(ROOT / "scripts" / "docker_base.sh"), base], check=True, capture_output=True)
    wheels = ["-v", "/opt/wheels:/opt/wheels:ro", "--build-arg", "PIP_FIND_LINKS=/opt/wheels"] if Path(
        "/opt/wheels").is_dir() else []  # a local CPU wheel of torch, where the machine has one
    build = subprocess.run([buildah, "bud", "--isolation=chroot", *wheels, "--build-arg", f"BASE={base}",
                            "--build-arg", "GIT_COMMIT=0123abc", "-t", "abc_lightning:test", str(ROOT)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    runs = tmp_path / "runs"
    runs.mkdir()
    container = subprocess.run([buildah, "from", "abc_lightning:test"], capture_output=True, text=True,
                               check=True).stdout.strip()
    try:
        run = subprocess.run([buildah, "run", "--isolation=chroot", "-v", f"{runs}:/opt/abc_lightning/runs",
                              "--workingdir", "/opt/abc_lightning", container, "--", "python", "-m", "abc_lightning",
                              "fit", "--config", "configs/debug.yaml", "--trainer.max_epochs=1",
                              "--wandb.mode=disabled"], capture_output=True, text=True)
    finally:
        subprocess.run([buildah, "rm", container], capture_output=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (runs / "debug" / "version_0" / "checkpoints" / "last.ckpt").is_file()
    assert "0123abc" in (runs / "debug" / "version_0" / "run_info.json").read_text()  # the baked commit


def test_run_info_takes_the_checkouts_commit_inside_one():
    import subprocess

    from abc_lightning.runs import provenance

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    assert provenance.git_commit().removesuffix("-dirty") == head.stdout.strip()
