"""A run a cluster can stop and resume: stop signals, mid-epoch resumes, the last step's
checkpoint, one writer per run folder, and ``--ckpt_path last``."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from abc_lightning.cli import run_cli, with_run_config
from abc_lightning.cli.faults import describe
from abc_lightning.errors import CheckpointError, Terminated
from abc_lightning.runs.checkpoints import load_checkpoint
from abc_lightning.runs.folders import latest_last_ckpt, lock_run
from abc_lightning.training.stopping import GracefulStop

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
#: 4 epochs of 5 steps with a checkpoint every 3 steps (most of them mid-epoch), a metrics
#: row every 2 steps, dropout on (the random stream must resume too), no W&B
TINY = ["fit", "--config", DEBUG, "--trainer.limit_train_batches=5", "--trainer.limit_val_batches=1",
        "--trainer.max_epochs=4", "--data.val_lengths=[6]", "--trainer.log_every_n_steps=2",
        "--trainer.enable_progress_bar=false", "--wandb.mode=disabled", "--model.dropout=0.1",
        "--trainer.callbacks.init_args.every_n_train_steps=3"]
RUN = Path("runs/debug/version_0")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}


def start(cwd: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "abc_lightning", *TINY, *extra], cwd=cwd, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def step_of(path: Path) -> int:
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True).get("global_step", -1))
    except Exception:  # not there yet, or being renamed into place
        return -1


def final(cwd: Path) -> tuple[dict, str]:
    ckpt = load_checkpoint(cwd / RUN / "checkpoints" / "last.ckpt")
    return ckpt, (cwd / RUN / "metrics.csv").read_text()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[dict, str]:
    cwd = tmp_path_factory.mktemp("full")
    proc = start(cwd)
    assert proc.wait(timeout=600) == 0, proc.stderr.read()
    return final(cwd)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_run_stopped_mid_epoch_resumes_to_the_uninterrupted_weights_and_metrics(tmp_path, uninterrupted, signum):
    """Stopped after its first mid-epoch checkpoint (step 3 of an epoch of 5), by a scheduler's
    SIGTERM, a Ctrl+C or SIGKILL, then resumed with the documented command (no --config)."""
    proc = start(tmp_path)
    last = tmp_path / RUN / "checkpoints" / "last.ckpt"
    deadline = time.time() + 600
    while step_of(last) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert step_of(last) >= 3, "the fit wrote no checkpoint to stop after"
    proc.send_signal(signum)
    err = proc.communicate(timeout=120)[1]
    lines = err.strip().splitlines()
    if signum == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert lines[-1].startswith("abc_lightning: error: stopped by SIGTERM; saved step "), err
        assert lines[-1].endswith(f"--ckpt_path {RUN}/checkpoints/last.ckpt")
    elif signum == signal.SIGINT:
        assert proc.returncode == 130, err
        assert lines[-1].startswith("abc_lightning: error: interrupted; resume with:"), err
    else:
        assert proc.returncode == -9
    assert "Traceback" not in err
    resumed = subprocess.run([sys.executable, "-m", "abc_lightning", "fit", "--ckpt_path", str(last)], cwd=tmp_path,
                             env=ENV, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    ckpt, metrics = final(tmp_path)
    full, full_metrics = uninterrupted
    assert ckpt["global_step"] == full["global_step"] == 20  # the last step has a checkpoint
    for key, value in full["state_dict"].items():
        assert torch.equal(value, ckpt["state_dict"][key]), key
    assert metrics == full_metrics
    assert not list((tmp_path / RUN).rglob(".*.tmp"))


def test_a_stop_signal_waits_for_the_step_then_a_long_step_is_cut_short():
    """The first signal is held for the next step boundary; a step still running after the
    grace period (or a second signal) ends at once."""
    stop = GracefulStop(grace_seconds=0.2)
    stop.on_train_start(None, None)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.pending == signal.SIGTERM  # held: the step goes on
        started = time.monotonic()
        with pytest.raises(Terminated) as stopped:
            time.sleep(30)  # a step far longer than the grace period
        assert time.monotonic() - started < 5 and stopped.value.status == 143
    finally:
        stop._stand_down()
    assert signal.getsignal(signal.SIGTERM) is not stop._on_signal


def test_a_stop_outside_a_fit_says_nothing_is_lost():
    for stage in ("test", "predict"):
        line, status = describe(Terminated(signal.SIGTERM), stage=stage)
        assert (line, status) == (f"stopped by SIGTERM during {stage}; nothing to resume: run it again", 143)
        line, status = describe(KeyboardInterrupt(), stage=stage)
        assert (line, status) == (f"interrupted during {stage}; nothing to resume: run it again", 130)


def test_a_fit_stopped_while_starting_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """SIGTERM before any step: one line, 143, and no run folder (one named by the config included)."""
    monkeypatch.chdir(tmp_path)
    from abc_lightning.training.module import ArithmeticTransformer

    def terminate(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(ArithmeticTransformer, "on_fit_start", terminate)
    assert run_cli([*TINY, "--trainer.logger.init_args.version=named"]) == 143
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "abc_lightning: error: stopped by SIGTERM before the first checkpoint; nothing to resume"
    assert not (tmp_path / "runs").exists()


def test_one_writer_per_run_folder_and_a_dead_writers_temporary_files_go(tmp_path):
    folder = tmp_path / "version_0"
    (folder / "checkpoints").mkdir(parents=True)
    leftover = folder / "checkpoints" / ".best.ckpt.4242.tmp"
    leftover.write_bytes(b"half a checkpoint")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from abc_lightning.runs.folders import "
                               f"lock_run; lock_run({str(folder)!r}); print('held', flush=True); time.sleep(60)"],
                              env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not leftover.exists()
        with pytest.raises(CheckpointError, match=rf"run folder .*version_0 is being written by process {holder.pid} "):
            lock_run(folder)
    finally:
        holder.kill()
        holder.wait()
    lock_run(folder)  # free again once its holder is gone


def test_ckpt_path_last_is_the_highest_step_whatever_its_name(tmp_path):
    def save(path: Path, step: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"global_step": step, "state_dict": {}}, path)

    root = tmp_path / "runs" / "abs"
    save(root / "version_0" / "checkpoints" / "last.ckpt", 900)
    save(root / "version_1" / "checkpoints" / "last.ckpt", 40)  # a stale last.ckpt beside a resume's
    save(root / "version_1" / "checkpoints" / "last-v1.ckpt", 80)
    save(root / "version_1" / "checkpoints" / "epoch=0-step=60.ckpt", 60)
    save(root / "named" / "checkpoints" / "best.ckpt", 7)

    def config(version=None) -> dict:
        init = {"save_dir": str(tmp_path / "runs"), "name": "abs", "version": version}
        return {"trainer": {"logger": type("L", (), {"class_path": "lightning.pytorch.loggers.CSVLogger",
                                                     "init_args": init})()}}

    assert latest_last_ckpt(config()).name == "last-v1.ckpt"  # the newest run, its highest step
    assert latest_last_ckpt(config(0)) == root / "version_0" / "checkpoints" / "last.ckpt"
    assert latest_last_ckpt(config("named")).name == "best.ckpt"
    with pytest.raises(CheckpointError, match="no checkpoint under .*version_5 to resume"):
        latest_last_ckpt(config(5))


def test_the_documented_resume_command_takes_the_runs_own_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = Path("runs/abs/version_3")
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("seed_everything: 0\n")
    ckpt = str(run / "checkpoints" / "last.ckpt")
    assert with_run_config(["fit", "--ckpt_path", ckpt, "--trainer.max_epochs=9"]) == [
        "fit", "--config", str(run / "config.yaml"), "--ckpt_path", ckpt, "--trainer.max_epochs=9"]
    assert with_run_config(["fit", f"--ckpt_path={ckpt}"])[:3] == ["fit", "--config", str(run / "config.yaml")]
    given = ["fit", "--config", "mine.yaml", "--ckpt_path", ckpt]
    assert with_run_config(given) == given  # a config given is the one used
    assert with_run_config(["test", "--ckpt_path", ckpt]) == ["test", "--ckpt_path", ckpt]


@pytest.mark.slow
def test_reproduce_passes_a_stop_on_to_the_run_under_way_and_ends_with_143(tmp_path):
    """SIGTERM to ``reproduce`` alone: the cell's fit gets it, saves and ends; nothing is orphaned."""
    proc = subprocess.Popen([sys.executable, "-m", "abc_lightning", "reproduce", "table1", "--only", "abs_successor",
                             "--results", str(tmp_path), "--", "--trainer.max_epochs=50"], cwd=ROOT, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = tmp_path / "table1" / "runs" / "abs_successor" / "fit" / "config.yaml"
    deadline = time.time() + 600
    while not started.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert started.exists(), "the cell's fit never started"
    time.sleep(5)  # into its training, on most machines (a stop before it is as clean)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("abc_lightning: error: stopped by SIGTERM; run the same command")
    log = (tmp_path / "table1" / "abs_successor.fit.log").read_text().strip().splitlines()
    assert log[-1].startswith("abc_lightning: error: stopped by SIGTERM"), log[-3:]
    assert not (tmp_path / "table1" / "abs_successor.json").exists()  # no record of a run cut short


@pytest.mark.parametrize("setting,says", [
    ("--data.batch_size=100000000", r"data.batch_size=100000000: one training step at \d+ tokens needs at least "
                                    r"[\d,.]+ GiB, and [\d,.]+ GiB is free; the largest batch that fits is about [\d,]+$"),
    ("--data.val_samples=1000000000", r"data.val_samples=1000000000: its inputs at 1 length\(s\) of up to \d+ tokens "
                                      r"need at least [\d,.]+ GiB, and [\d,.]+ GiB is free; the most that fits is"),
])
def test_a_setting_past_the_machines_memory_is_refused_before_anything_is_allocated(tmp_path, monkeypatch, capsys,
                                                                                    setting, says):
    monkeypatch.chdir(tmp_path)
    assert run_cli([*TINY, setting]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match("abc_lightning: error: " + says, line), line
    assert not (tmp_path / "runs").exists()


def test_an_allocation_that_fails_anyway_is_one_line_naming_what_to_shrink():
    line, status = describe(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate "
                                         "memory: you tried to allocate 40000000000 bytes"))
    assert status == 1 and line.startswith("out of memory (") and "data.batch_size" in line
