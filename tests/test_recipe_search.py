"""studies/recipe.py: each candidate's overrides train what it trained when it was recorded,
now that configs/abs.yaml holds the recipe (ErrorReplay, encoder attention drop 0.5)."""
from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def recipe():
    return load_script(ROOT / "studies" / "recipe.py")


def test_the_abs_config_holds_the_chosen_candidate(recipe):
    model = yaml.safe_load((ROOT / "configs" / "abs.yaml").read_text())["model"]
    assert model["encoder_attention_drop"] == 0.5
    chosen = recipe.CANDIDATES["cos1k_replay_encdrop05"][1]
    assert recipe.NO_REPLAY not in chosen and recipe.NO_ENCODER_DROP not in chosen


@pytest.mark.parametrize("name", ["cos1k", "cos2k", "cos1k_replay", "cos1k_replay_extremes", "cos1k_rich"])
def test_candidates_recorded_before_the_drop_turn_it_off(recipe, name):
    flags = recipe.CANDIDATES[name][1]
    assert flags.count(recipe.NO_ENCODER_DROP) == 1
    assert (recipe.NO_REPLAY in flags) == (name not in recipe.REPLAYS)


def test_other_configs_candidates_get_no_abs_overrides(recipe):
    others = {name: flags for name, (_, flags) in recipe.CANDIDATES.items() if name.startswith(("abc_", "base"))}
    assert others, "the search has candidates of configs/abc.yaml and baseline.yaml"
    for name, flags in others.items():
        assert recipe.NO_ENCODER_DROP not in flags and recipe.NO_REPLAY not in flags, name
