"""Property-based checks: generated bad configs and predict inputs each get one clear line.

Every example must end in ``abc_lightning: error: ...`` on stderr with exit status 2: no
traceback, no hang, and no checkpoint left behind.
"""

import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from abc_lightning.cli import run_cli
from abc_lightning.data import data_module_for, data_module_names
from abc_lightning.errors import InputError

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

ident = st.from_regex(r"[A-Z][A-Za-z0-9]{0,12}", fullmatch=True)
bad_int = st.one_of(st.integers(max_value=0), st.text(string.ascii_letters, min_size=1, max_size=6),
                    st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)).map(str))
too_long = st.integers(min_value=10_001, max_value=10**9)

#: generated bad overrides, each with what its one line must say (the key or check it broke):
#: a line that only says "error" would pass a bare exit-status test, not this one
BAD_CONFIGS = st.one_of(
    bad_int.map(lambda v: ([f"--model.d_model={v}"], r"d_model")),
    st.integers(2, 31).filter(lambda h: 32 % h).map(lambda h: ([f"--model.heads={h}"],
                                                                rf"heads \({h}\) must divide d_model")),
    bad_int.map(lambda v: ([f"--model.decoder_layers={v}"], r"decoder_layers")),
    bad_int.map(lambda v: ([f"--data.batch_size={v}"], r"batch_size")),
    st.floats(min_value=1.0, max_value=1e6).map(lambda p: ([f"--model.dropout={p}"], r"dropout must be in \[0, 1\)")),
    st.floats(max_value=-1e-6, min_value=-1e6).map(lambda p: ([f"--model.dropout={p}"],
                                                              r"dropout must be in \[0, 1\)")),
    ident.filter(lambda n: n not in data_module_names() and n not in {"ArithmeticDataModule"})
      .map(lambda n: ([f"--data={n}"], rf"data: unknown class '{n}'")),
    ident.filter(lambda n: n not in {"NoPE", "Sinusoidal", "Learned", "Rotary", "ALiBi", "T5Relative",
                                     "Sandwich", "FIRE"})
      .map(lambda n: ([f"--model.positional={n}"], rf"model.positional: unknown class '{n}'")),
    st.integers(max_value=-1).map(lambda w: (["--bias=AttentionWindow", f"--bias.self_width={w}"],
                                             rf"self_width must be an integer >= 0 .*got {w}")),
    st.integers(max_value=0).map(lambda t: (["--model.position_index=CyclicIndex",
                                             f"--model.position_index.period={t}"],
                                            rf"CPI period T must be an integer >= 1, got {t}")),
    st.lists(st.one_of(st.integers(max_value=0), too_long), min_size=1, max_size=3)
      .map(lambda xs: ([f"--data.test_lengths={xs}"], r"data.test_lengths must be digit counts between 1 and 10000")),
    st.integers(201, 10_000).map(lambda n: (["--data=Multiplication", f"--data.test_lengths=[{n}]"],  # its max_length
                                            r"between 1 and 200 for multiplication")),
    st.integers(30, 200).map(lambda n: (["--model.positional=Learned", "--model.positional.max_position=24",
                                         f"--data.val_lengths=[{n}]"],  # past the model's positions
                                        r"but Learned encodes positions < 24")),
)


def one_error_line(capsys, args) -> str:
    try:
        code = run_cli(args)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.startswith("abc_lightning: error:")]
    assert code == 2, captured.err[-2000:]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err[-2000:]
    return lines[0]


@pytest.mark.slow
@settings(max_examples=100, **SETTINGS)
@given(case=BAD_CONFIGS)
def test_generated_bad_configs_get_one_line(capsys, case):
    override, says = case
    line = one_error_line(capsys, ["fit", "--config", DEBUG, "--trainer.max_epochs=0", *override])
    assert re.search(says, line), f"{override}: {line!r} does not say {says!r}"
    assert not any(Path(".").rglob("*.ckpt"))
    assert not any(Path(".").glob("runs/*/version_*")), "a failed start left a run folder behind"


def malformed(task_pattern: str):
    """Text that does not fully match the task's input pattern (ignoring spaces)."""
    alphabet = string.digits + "+*-/ x.,eE" + "٣²"
    return st.text(alphabet, max_size=30).filter(
        lambda t: not (t.replace(" ", "").isascii() and re.fullmatch(task_pattern, t.replace(" ", ""))))


@pytest.mark.parametrize("task", ["successor", "addition", "nx1", "parity"])
@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_generated_malformed_predict_inputs_raise_input_error(task, data):
    dm = data_module_for(task)
    text = data.draw(malformed(dm.task.pattern.pattern))
    with pytest.raises(InputError, match="input"):
        dm.parse(text)


@settings(max_examples=20, **SETTINGS)
@given(digits=st.integers(10_001, 50_000))
def test_huge_predict_inputs_are_refused(digits):
    with pytest.raises(InputError, match="longer than this project evaluates"):
        data_module_for("addition").parse("9" * digits + "+1")


@pytest.mark.parametrize("task,text", [("addition", "9" * 10_000 + "+1"), ("successor", "9" * 10_000),
                                       ("parity", "1" * 33_220), ("multiplication", "9" * 200 + "*" + "9" * 200)])
def test_the_longest_input_each_task_evaluates_is_taken(task, text):
    """10,000 digits an operand (the project's limit; parity's bits of a 10,000-digit number),
    and N×M's 200: taken, one more refused."""
    dm = data_module_for(task)
    assert dm.parse(text)["src"].shape[0] == 1
    longer = text.replace("9", "99", 1) if "9" in text else "1" + text
    if task == "parity":
        longer = "1" * 40_000
    with pytest.raises(InputError, match="longer than"):
        dm.parse(longer)


@pytest.mark.slow
@settings(max_examples=15, **SETTINGS)
@given(text=malformed(r"\d+"))
def test_generated_malformed_predict_inputs_through_the_cli(capsys, tmp_path, text):
    from tests.test_cli import plain_checkpoint

    ckpt = tmp_path / "ok.ckpt"
    if not ckpt.exists():
        plain_checkpoint(str(ckpt))
    line = one_error_line(capsys, ["predict", "--config", DEBUG, "--ckpt_path", str(ckpt),
                                   "--trainer.logger=false", f"--data.predict_inputs=[{text!r}]"])
    with pytest.raises(InputError) as refused:  # the data module's own message for this input
        data_module_for("successor").parse(text)
    assert str(refused.value) in line
