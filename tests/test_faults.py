"""Faults at run time: a full disk, a read-only folder, a kill mid-save, W&B without a key,
fits that would do nothing, and the API's bad arguments. Each ends in one line and an exit
status, and nothing is lost or left behind."""

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from abc_lightning.runs import files
from abc_lightning.runs.checkpoints import load_checkpoint
from abc_lightning.cli import run_cli
from abc_lightning.errors import ConfigError, InputError

from tests.helpers import one_error_line

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
#: epochs of 5 steps, a metrics row every 2, one validation batch at one length, no W&B
TINY = ["fit", "--config", DEBUG, "--trainer.limit_train_batches=5", "--trainer.limit_val_batches=1",
        "--data.val_lengths=[6]", "--trainer.log_every_n_steps=2", "--trainer.enable_progress_bar=false",
        "--wandb.mode=disabled"]
LAST = Path("runs/debug/version_0/checkpoints/last.ckpt")


class FailingWrites:
    """``open`` for :mod:`abc_lightning.runs.files` that lets ``allowed`` writes of ``target``
    through, then writes half of the next one and raises ``error`` (a disk that fills, or a
    kill that lands mid-save)."""

    def __init__(self, target: str, allowed: int, error: BaseException):
        self.target, self.allowed, self.error = target, allowed, error

    def __call__(self, path, mode="r", **kwargs):
        fh = open(path, mode, **kwargs)
        if self.target not in str(path) or "w" not in mode:
            return fh
        if self.allowed > 0:
            self.allowed -= 1
            return fh
        error = self.error

        class Half:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

            def write(self, data):
                fh.write(bytes(data)[: len(data) // 2])
                raise error

            def __getattr__(self, name):
                return getattr(fh, name)
        return Half()


def weights(path: Path) -> dict:
    return load_checkpoint(path)["state_dict"]


@pytest.mark.parametrize("fault,status,says", [
    (OSError(errno.ENOSPC, "No space left on device"), 1, "no space left on the device; free some space"),
    (KeyboardInterrupt(), 130, "interrupted; resume with: python -m abc_lightning fit --config"),
])
@pytest.mark.slow
def test_a_save_cut_short_keeps_the_last_checkpoint_and_a_resume_matches(capsys, monkeypatch, fault, status, says):
    """The second epoch's last.ckpt save fails half-way: one line, the first epoch's
    last.ckpt still loads, no temporary file is left, and resuming from it ends where an
    uninterrupted run ends."""
    assert run_cli([*TINY, "--trainer.max_epochs=2", "--trainer.logger.init_args.name=whole"]) == 0
    monkeypatch.setattr(files, "open", FailingWrites("last.ckpt", allowed=1, error=fault), raising=False)
    assert run_cli([*TINY, "--trainer.max_epochs=2"]) == status
    line = one_error_line(capsys)
    assert says in line and "last.ckpt" in line
    assert load_checkpoint(LAST)["global_step"] == 5  # the first epoch's, whole
    assert not list(LAST.parent.glob(".*.tmp"))
    monkeypatch.delattr(files, "open")  # (undo() would also undo the test folder chdir)
    # (--ckpt_path last would take best.ckpt: the second epoch's save of it went through, at step 10)
    assert run_cli([*TINY, "--trainer.max_epochs=2", "--ckpt_path", str(LAST)]) == 0
    assert sorted(p.name for p in Path("runs/debug").iterdir()) == ["version_0"]  # resumed in its own folder
    resumed, whole = weights(LAST), weights(Path("runs/whole/version_0/checkpoints/last.ckpt"))
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)
    steps = [line.split(",")[1] for line in (LAST.parents[1] / "metrics.csv").read_text().splitlines()[1:]]
    assert steps == [line.split(",")[1] for line in
                     Path("runs/whole/version_0/metrics.csv").read_text().splitlines()[1:]]  # each step once


def test_a_real_full_disk_says_so_and_keeps_the_run(capsys, tmp_path):
    """On a 300 KB tmpfs (where this machine lets us mount one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here; the patched writer above covers the same path")
    try:
        assert run_cli([*TINY, "--trainer.max_epochs=2", f"--trainer.logger.init_args.save_dir={disk}"]) == 1
        assert "no space left on the device" in one_error_line(capsys)
        assert not list(disk.rglob(".*.tmp"))
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def read_only(folder: Path) -> bool:
    """Make ``folder`` read-only: a read-only tmpfs as root, file modes otherwise."""
    folder.mkdir()
    if os.geteuid() == 0:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                              capture_output=True).returncode == 0
    folder.chmod(0o555)
    return True


@pytest.mark.parametrize("save_dir,says", [("ro/runs", "read-only"), ("afile/runs", "is a file, not a folder")])
def test_a_folder_that_cannot_be_written_is_one_line_and_leaves_nothing(capsys, tmp_path, save_dir, says):
    if save_dir.startswith("ro") and not read_only(tmp_path / "ro"):
        pytest.skip("cannot make a read-only folder here")
    (tmp_path / "afile").write_text("x")
    try:
        assert run_cli([*TINY, "--trainer.max_epochs=1", f"--trainer.logger.init_args.save_dir={save_dir}"]) == 2
        line = one_error_line(capsys)
        assert (says in line or "permission denied" in line) and "save_dir=PATH" in line
        assert not Path("runs").exists()
    finally:
        subprocess.run(["umount", str(tmp_path / "ro")], capture_output=True, check=False)


def test_wandb_online_without_a_key_is_one_line_and_leaves_no_run(capsys, monkeypatch, tmp_path):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_home"))
    assert run_cli([*TINY[:-1], "--wandb.mode=online", "--trainer.max_epochs=1"]) == 2
    line = one_error_line(capsys)
    assert "W&B could not start" in line and "wandb login" in line and "--wandb.mode=offline" in line
    assert not list(Path("runs").rglob("version_*"))


def as_in_a_terminal() -> None:
    """A child's Ctrl+C as a terminal gives it: a shell that starts a job in the background
    (as CI runners may start the tests) passes SIGINT down ignored, and Python then keeps
    ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shut_down(proc: subprocess.Popen) -> str:
    """The stderr of a process sent SIGINT, once it exits. One that has not exited after 5
    minutes (2 s alone) is aborted, so that its stderr shows where each thread was."""
    try:
        return proc.communicate(timeout=300)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER prints every thread's stack
        raise AssertionError("no exit 5 min after SIGINT; its stacks:\n" + proc.communicate(timeout=60)[1][-8000:])


@pytest.mark.slow
def test_a_ctrl_c_while_starting_is_one_line(tmp_path):
    """SIGINT while Python still imports torch and Lightning (held until the imports end:
    inside a library's import it can be swallowed, or leave a half-loaded extension), or
    sets the run up."""
    proc = subprocess.Popen([sys.executable, "-m", "abc_lightning", *TINY], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                            preexec_fn=as_in_a_terminal)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    err = shut_down(proc)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "abc_lightning: error: interrupted before the first checkpoint; nothing to resume"
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ckpt"))


@pytest.mark.slow
def test_a_real_ctrl_c_names_the_checkpoint_to_resume(tmp_path):
    """SIGINT to a running fit (a process of its own, as a user's Ctrl+C)."""
    args = [sys.executable, "-m", "abc_lightning", *TINY, "--trainer.max_epochs=1000"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"},
                            preexec_fn=as_in_a_terminal)
    deadline = time.time() + 600  # the first checkpoint: seconds alone, minutes on a busy machine
    while not (tmp_path / LAST).exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert (tmp_path / LAST).exists(), "the fit wrote no checkpoint to interrupt after"
    proc.send_signal(signal.SIGINT)
    err = shut_down(proc)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == ("abc_lightning: error: interrupted; resume with: python -m abc_lightning "
                                            "fit --config runs/debug/version_0/config.yaml --ckpt_path "
                                            "runs/debug/version_0/checkpoints/last.ckpt")
    assert "Traceback" not in err
    load_checkpoint(tmp_path / LAST)


@pytest.mark.parametrize("args,says", [
    (["--trainer.max_epochs=0"], "trainer.max_epochs=0: this fit would train nothing"),
    (["--trainer.max_steps=0"], "trainer.max_steps=0: this fit would train nothing"),
    (["--trainer.limit_train_batches=0"], "trainer.limit_train_batches=0: this fit would train nothing"),
    (["--ckpt_path", "last"], "--ckpt_path last: no checkpoint under runs/debug to resume"),
    (["--trainer.val_check_interval=0"], "trainer.val_check_interval=0: expected a share of an epoch"),
    (["--trainer.val_check_interval=1000"], "trainer.val_check_interval=1000: more steps than an epoch's 5"),
    (["--trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0: expected batches"),
    (["--trainer.gradient_clip_val=-1"], "trainer.gradient_clip_val=-1.0: expected a norm or value >= 0"),
    (["--data.val_lengths=[]"], "data.val_lengths is empty"),
    (["--trainer.max_time=00:00:00:00"], "trainer.max_time=00:00:00:00: this fit would train nothing"),
    (["--seed_everything=-1"], "seed_everything=-1: expected an integer from 0 to 4294967295"),
])
def test_a_fit_that_would_do_nothing_or_divide_by_zero_is_refused(capsys, args, says):
    assert run_cli([*TINY, *args]) == 2
    assert says in one_error_line(capsys)
    assert not Path("runs").exists()


def test_an_evaluation_of_nothing_is_refused(capsys):
    assert run_cli([*TINY, "--trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    for args, says in [(["test", "--trainer.limit_test_batches=0"], "limit_test_batches=0: this test would evaluate"),
                       (["validate", "--trainer.limit_val_batches=0"], "limit_val_batches=0: this validate would"),
                       (["test", "--data.test_lengths=[]"], "data.test_lengths is empty: test needs at least one")]:
        assert run_cli([args[0], "--ckpt_path", str(LAST), *args[1:]]) == 2
        assert says in one_error_line(capsys)
    assert sorted(p.name for p in Path("runs/debug").iterdir()) == ["version_0"]


def test_a_resume_past_the_budget_is_refused_and_says_how_to_extend_it(capsys):
    assert run_cli([*TINY, "--trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    assert run_cli([*TINY, "--trainer.max_epochs=1", "--ckpt_path", str(LAST)]) == 2
    assert "has trained 1 epochs (5 steps), all of trainer.max_epochs=1" in one_error_line(capsys)
    assert sorted(p.name for p in Path("runs/debug").iterdir()) == ["version_0"]


@pytest.mark.parametrize("content,says", [
    (b"\xff\xfe model: {}", "is not UTF-8 text (byte 0)"),
    (b"just a sentence", "holds a YAML str, not a mapping of settings"),
    (b"model: [1, 2", "is not valid YAML"),
    (b"", "is empty; a config is a YAML mapping of settings"),
    (b"model:\n  lr: 0.1\nmodel:\n  lr: 0.2\n", "is not valid YAML at line 3: the key 'model' appears twice"),
    (b"a: &a [1, 1]\nb: &b [*a, *a]\nc: &c [*b, *b]\n" + b"".join(b"x%d: [*c, *c, *c]\n" % i for i in range(22)),
     "uses 70 YAML aliases (*name); a config uses at most 64"),
])
def test_a_config_that_is_not_yaml_settings_is_one_line(capsys, content, says):
    Path("bad.yaml").write_bytes(content)
    assert run_cli(["fit", "--config", "bad.yaml"]) == 2
    assert f"config: bad.yaml {says}" in one_error_line(capsys)


@pytest.mark.parametrize("model,says", [
    ("null", "model: expected its settings (e.g. d_model: 64), got null; leave the key out for the defaults"),
    ("[1, 2]", "model: expected its settings (e.g. d_model: 64), got list [1, 2]"),
])
def test_a_model_section_that_is_not_settings_is_one_line(capsys, model, says):
    Path("bad.yaml").write_text(f"config: {DEBUG}\nmodel: {model}\n")
    assert run_cli(["fit", "--config", "bad.yaml"]) == 2
    assert one_error_line(capsys) == f"abc_lightning: error: {says}"


def test_a_config_that_is_a_pipe_or_huge_is_refused_before_it_is_read(capsys):
    import os

    os.mkfifo("pipe.yaml")  # reading it would block for good
    assert run_cli(["fit", "--config", "pipe.yaml"]) == 2
    assert "config: pipe.yaml is not a regular file (a pipe or a device)" in one_error_line(capsys)
    Path("big.yaml").write_bytes(b"# " + b"x" * (2 << 20) + b"\nmodel: {}\n")
    assert run_cli(["fit", "--config", "big.yaml"]) == 2
    assert "a config is at most 1,048,576" in one_error_line(capsys)


@pytest.mark.slow
def test_predict_reads_inputs_as_written(capsys):
    assert run_cli([*TINY, "--trainer.max_epochs=1"]) == 0
    capsys.readouterr()
    common = ["predict", "--ckpt_path", str(LAST)]
    assert run_cli([*common, '--data.predict_inputs=["1 2"]']) == 2
    assert "'1 2' is not a successor input: it has a space inside a number" in one_error_line(capsys)
    assert run_cli([*common, '--data.predict_inputs=[" 12"]']) == 2
    assert "' 12' is not a successor input: it starts or ends with a space" in one_error_line(capsys)
    Path("inputs.bin").write_bytes(b"12\n\xff\xfe\n")
    assert run_cli([*common, "--data.predict_file=inputs.bin"]) == 2
    assert "data.predict_file inputs.bin is not UTF-8 text" in one_error_line(capsys)
    assert run_cli([*common, '--data.predict_inputs=["007"]']) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("007 = ")  # the input as given


def test_the_api_checks_what_the_cli_checks():
    from abc_lightning import load

    assert run_cli([*TINY, "--trainer.max_epochs=1"]) == 0
    model = load(LAST)
    assert model.predict("123") == model.predict(["123"])[0]  # a bare string is one input
    for call, error, says in [
        (lambda: model.predict(["1"], batch_size=-1), ConfigError, "batch_size must be an integer >= 1, got -1"),
        (lambda: model.predict(123), InputError, "inputs must be a list of strings"),
        (lambda: model.predict(["1 2"]), InputError, "space inside a number"),
        (lambda: model.evaluate(samples=0), ConfigError, "samples must be an integer >= 1, got 0"),
        (lambda: model.evaluate(samples=-5), ConfigError, "samples must be an integer >= 1, got -5"),
        (lambda: load(LAST, device="banana"), ConfigError, "device 'banana' is not a torch device"),
        (lambda: load(LAST, device="cuda:7"), ConfigError, "device 'cuda:7': torch sees"),
        (lambda: load(LAST, device="meta"), ConfigError, "device 'meta': abc_lightning runs on 'cpu' or a CUDA GPU"),
        (lambda: model.evaluate(lengths=None), ConfigError, "lengths: expected digit counts, e.g. [6, 60], got None"),
        (lambda: load("runs"), Exception, "checkpoint runs is a folder"),
        (lambda: load(None), Exception, "load takes a checkpoint's path"),
    ]:
        with pytest.raises(error, match=re.escape(says)):
            call()
    assert [row["length"] for row in model.evaluate(lengths=6, samples=5)] == [6]  # one length as an int


def test_reproduce_and_sweep_name_an_unwritable_output_folder_in_one_line(capsys):
    from abc_lightning.__main__ import guarded
    from abc_lightning.reproduce import main as reproduce

    Path("afile").write_text("x")
    assert guarded(reproduce, ["table1", "--results", "afile/out", "--only", "abs_parity", "--table-only"],
                   "--results PATH") == 2
    line = one_error_line(capsys)
    assert "a part of the path is a file, not a folder" in line and line.endswith("--results PATH")
