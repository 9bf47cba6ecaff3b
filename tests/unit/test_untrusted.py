import math

import pytest

from sloguard import untrusted
from sloguard.untrusted import Invalid


@pytest.mark.parametrize(("value", "reason"), [
    (2**63, "out_of_range"), (-1, "out_of_range"), (math.nan, "not_finite"), (math.inf, "not_finite"),
    ("12", "not_a_number"), (True, "not_a_number"), (10**400, "out_of_range"), (1.5, "not_an_integer"),
])
def test_count_rejects(value: object, reason: str) -> None:
    with pytest.raises(Invalid) as err:
        untrusted.count(value)
    assert err.value.reason == reason


@pytest.mark.parametrize(("value", "want"), [(0, 0), (20, 20), (20.0, 20), (2**53, 2**53)])
def test_count_accepts(value: object, want: int) -> None:
    assert untrusted.count(value) == want


@pytest.mark.parametrize(("value", "want"), [
    ("llama\x1b[31m", "llama[31m"), ("a\u2028b\r\nc", "abc"), ("x" * 300, "x" * 255 + "…"), ("\u202egnp", "gnp"),
])
def test_text_strips_controls_and_bounds(value: str, want: str) -> None:
    assert untrusted.text(value) == want


def test_reject_counts_and_exports() -> None:
    untrusted.REJECTIONS.clear()
    untrusted.reject("probe", "out_of_range")
    untrusted.reject("probe", "out_of_range", n=2)
    (fam,) = untrusted.families()
    assert [(s.name, s.labels, s.value) for s in fam.samples if s.name.endswith("_total")] == [
        ("sloguard_invalid_input_total", {"source": "probe", "reason": "out_of_range"}, 3.0)]
    untrusted.REJECTIONS.clear()
