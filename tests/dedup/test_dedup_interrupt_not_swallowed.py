"""A Ctrl-C during a cluster run is never lost: one swallowed on its way up
(a library that catches everything, a callback that drops it) is raised again
at the shard loop's next step."""

from __future__ import annotations

import signal

import pytest

from retest.cluster._dask import _interrupts_not_dropped, _raise_if_interrupted


def test_a_swallowed_ctrl_c_is_raised_again() -> None:
    # as in a terminal (a run started from a background job inherits SIGINT ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _check_swallowed_ctrl_c_is_raised_again()
    finally:
        signal.signal(signal.SIGINT, outer)


def _check_swallowed_ctrl_c_is_raised_again() -> None:
    before = signal.getsignal(signal.SIGINT)
    with _interrupts_not_dropped():
        _raise_if_interrupted()  # nothing pending: no-op
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # what a catch-all on the way up does
        with pytest.raises(KeyboardInterrupt):
            _raise_if_interrupted()
    # the handler is the caller's again and nothing is left pending
    assert signal.getsignal(signal.SIGINT) is before
    _raise_if_interrupted()
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)  # the default handler is back
