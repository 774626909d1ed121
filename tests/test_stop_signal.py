"""The run's stop signal: a record of why the run stops and, when --stop-when-decided decided it, the verdict - as a
value, so no code decides on a message's text; a later, shorter record leaves nothing of an earlier one, and a signal
that cannot be read is a stop all the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from personalens_testkit.run.stop import StopSignal


def test_a_decision_travels_as_a_value_whatever_the_reason_says(tmp_path):
    signal = StopSignal(tmp_path)
    signal.prepare()
    assert signal.read() is None
    signal.raise_("decided red after 40 scenario(s): ...", "green")  # the text says red: the value is what counts
    assert signal.read() == ("decided red after 40 scenario(s): ...", "green")
    signal.raise_("the budget: spent $1.00 of --max-cost $1.00")
    assert signal.read() == ("the budget: spent $1.00 of --max-cost $1.00", None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=300), st.sampled_from([None, "red", "green"])), min_size=1,
                max_size=4))
def test_the_last_record_is_read_whole_whatever_came_before(tmp_path_factory, records):
    signal = StopSignal(tmp_path_factory.mktemp("run"))
    signal.prepare()
    for reason, decision in records:
        signal.raise_(reason, decision)
    reason, decision = records[-1]
    assert signal.read() == (reason or "the run was told to stop", decision)


def test_a_signal_that_cannot_be_read_still_stops_the_run(tmp_path):
    signal = StopSignal(tmp_path)
    signal.path.write_text('{"reason": "no space left on the d')  # cut short
    assert signal.read() == ("the run was told to stop (its stop signal could not be read)", None)
    signal.path.write_text('["not", "a", "record"]')
    assert signal.reason() == "the run was told to stop (its stop signal could not be read)"
