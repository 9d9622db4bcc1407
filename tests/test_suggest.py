"""The one "did you mean": every layer's near-miss hint is `amibuild.suggest.suggest`, worded alike."""

from __future__ import annotations

import pytest

from amibuild import suggest as suggest_mod
from amibuild.aws import regions
from amibuild.suggest import suggest


@pytest.mark.parametrize("word, choices, kwargs, want", [
    ("us-wset-2", ["us-west-2", "eu-west-1"], {}, " (did you mean 'us-west-2'?)"),
    ("varaint", ["pipeline", "defaults", "variant", "channel"], {}, " (did you mean 'variant'?)"),
    ("zzz", ["pipeline", "defaults"], {}, ""),  # nothing close: no hint at all
    ("anything", [], {}, ""),
    ("stabl", ["stable", "recommended"], {}, " (did you mean 'stable'?)"),
    # a looser cutoff finds what the default does not
    ("rec", ["recommended"], {"cutoff": 0.4}, " (did you mean 'recommended'?)"),
    ("rec", ["recommended"], {}, ""),
])
def test_suggest_names_the_closest_choice_or_nothing(word, choices, kwargs, want) -> None:
    assert suggest(word, choices, **kwargs) == want


def test_a_bad_region_is_hinted_through_the_same_function() -> None:
    assert regions.suggest is suggest_mod.suggest
    assert regions.problem("us-wset-2") == "'us-wset-2' is not an AWS region (did you mean 'us-west-2'?)"
    assert regions.problem("us-west-2") is None
