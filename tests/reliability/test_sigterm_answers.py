"""SIGTERM with frames in flight and submits still coming: every submit answered exactly once."""

import pytest

from .conftest import scaled
from .trials import sigterm_trial

TRIALS = scaled(20)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_every_submit_across_sigterm_is_answered_exactly_once(seed):
    t = sigterm_trial(seed, sigterm_after=None if seed % 3 else 0)
    assert t.submitted > 0
    assert t.unanswered == 0 and t.unreleased == 0, t
    assert t.answered_once == t.submitted, t
    assert t.results + t.shutdown_errors == t.submitted, t
    assert t.goodbye and t.exit_status == 0, t
