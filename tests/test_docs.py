"""What README and docs name exists: every link, config, file path and CLI flag."""

import dataclasses
import inspect
import re
from pathlib import Path

import lightning as L
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "README.md"]
# a path of the repository, in backticks or a link: configs/…, docs/…, results/…, benchmarks/…, studies/…, …
PATH = re.compile(r"(?<![\w/.-])((?:configs|docs|results|benchmarks|studies|scripts|abc_lightning|tests|sweeps)/"
                  r"[\w./-]*[\w/])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
FLAG = re.compile(r"--(data|model|bias|trainer)\.(\w+)")


def _pages():
    return pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


@_pages()
def test_every_link_leads_somewhere(page):
    missing = [target for target in LINK.findall(_text(page))
               if not target.startswith(("http://", "https://", "mailto:"))
               and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to {missing}"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@_pages()
def test_every_anchor_names_a_heading(page):
    """``[…](results.md#the-training-recipe)`` leads to a heading of that page."""
    missing = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", _text(page)):
        linked = page if not target else page.parent / target
        if linked.suffix != ".md" or not linked.exists():
            continue
        headings = {_slug(line.lstrip("#")) for line in _text(linked).splitlines() if line.startswith("#")}
        if anchor not in headings:
            missing.append(f"{target}#{anchor}")
    assert not missing, f"{page.name} links to anchors that no heading makes: {missing}"


@_pages()
def test_every_path_it_names_exists(page):
    """Paths of this repository; a path with a
    placeholder (``<task>``, ``version_N``, ``*``) is a pattern, not a file."""
    missing = []
    for path in set(PATH.findall(_text(page))):
        if (re.search(r"[*{}]|version_\d|_N\b|/N/|seed\d?S|\.\.\.|…|/runs/|\.ckpt$|_$", path)
                or path.startswith("results/archive")):
            continue  # a pattern (``configs/abs_<task>.yaml``), a run's output, or a superseded table (in git)
        candidates = [ROOT / path, page.parent / path]
        if not any(c.exists() or c.with_suffix("").exists() for c in candidates):
            missing.append(path)
    assert not missing, f"{page.name} names {sorted(missing)}, which this checkout does not have"


def _keys(kind: str) -> set[str]:
    from abc_lightning.callbacks import AttentionBiasCalibration, AttentionWindow
    from abc_lightning.data import ArithmeticDataModule
    from abc_lightning.model.positional import PositionalScheme
    from abc_lightning.training.module import ArithmeticTransformer

    if kind == "bias":
        keys = set(inspect.signature(AttentionWindow).parameters) | set(
            inspect.signature(AttentionBiasCalibration).parameters)
        return keys
    if kind == "data":
        return set(inspect.signature(ArithmeticDataModule).parameters) | {"init_args", "class_path"}
    cls = {"data": ArithmeticDataModule, "model": ArithmeticTransformer, "trainer": L.Trainer}[kind]
    keys = set(inspect.signature(cls).parameters)
    if kind == "model":
        keys |= {f.name for f in dataclasses.fields(PositionalScheme)} if dataclasses.is_dataclass(PositionalScheme) else set()
    return keys


@_pages()
def test_every_flag_it_names_is_an_option(page):
    """``--data.X``, ``--model.X``, ``--bias.X`` and ``--trainer.X``: X is an argument of the
    data module, the LightningModule, a bias strategy or the Trainer."""
    wrong = sorted({f"--{kind}.{key}" for kind, key in FLAG.findall(_text(page)) if key not in _keys(kind)})
    assert not wrong, f"{page.name} names options that do not exist: {wrong}"


def test_readme_results_table_is_the_committed_tables():
    """Every figure of the README's table comes from results/*.json (scripts/readme_table.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "scripts" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = module.table(ROOT / "results")
    assert made.count("\n") >= 10  # a header, its rule and a row per cell
    assert made in _text(ROOT / "README.md"), "README's results table differs: python scripts/readme_table.py --write"


def test_readme_stays_a_two_minute_read():
    """At most 1,100 words (as ``wc -w`` counts them) and at most 5 commit hashes outside the
    results table, whose commit column names each row's commit."""
    text = _text(ROOT / "README.md")
    assert len(text.split()) <= 1100, f"README.md has {len(text.split())} words; the limit is 1,100"
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("|"))
    hashes = re.findall(r"`[0-9a-f]{7,40}`", prose)
    assert len(hashes) <= 5, f"README.md names {len(hashes)} commits outside its table: {hashes}"


def test_results_stays_a_curated_folder():
    """At most 60 committed files and 3 MB under results/: each table's .md, .json, figure and
    one compressed bundle of its records; the runs' folders, logs and loose records are ignored."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert (ROOT / "results" / "README.md").exists()
    size = sum((ROOT / f).stat().st_size for f in files if (ROOT / f).exists())
    assert len(files) <= 60 and size <= 3_000_000, f"git tracks {len(files)} files, {size:,} bytes under results/"
    assert not [f for f in files if f.count("/") > 1], "records travel in <table>.records.json.gz, not loose"


def test_the_docs_are_reference_of_a_readable_size():
    """docs/, the README and results/README.md together at most 15,000 words; docs/results.md
    at most 400 lines, naming no commit but the tables' own; the CHANGELOG at most 200 lines."""
    pages = [p for p in PAGES]
    words = {str(p.relative_to(ROOT)): len(_text(p).split()) for p in pages}
    assert sum(words.values()) <= 15_000, words
    results = _text(ROOT / "docs" / "results.md")
    assert len(results.splitlines()) <= 400
    headers = re.findall(r"^Commit (?:several: )?(.*)$", "\n".join(_text(p) for p in (ROOT / "results").glob("*.md")),
                         re.M)  # "Commit `abc1234`, …" or "Commit several: `abc1234` (118 runs), `def5678` (7 runs), …"
    found = [re.findall(r"`([0-9a-f]{7})` \(\d+ runs\)|^`([0-9a-f]{7})`", line) for line in headers]
    tables = {commit for matches in found for pair in matches for commit in pair if commit}
    assert tables and set(re.findall(r"`([0-9a-f]{7,40})`", results)) <= tables
    assert len(_text(ROOT / "CHANGELOG.md").splitlines()) <= 200
