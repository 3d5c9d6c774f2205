"""The run keeps Ctrl-C Python's for the tests that press it (tests/ctrl_c.py): a test that
leaves SIGINT's handler changed has it put back, with a warning naming it."""

from __future__ import annotations

import signal

from ctrl_c import restore_ctrl_c, take_ctrl_c


class Item:
    """A stand-in for a pytest item: records its warnings."""

    def __init__(self) -> None:
        self.warned: list[Warning] = []

    def warn(self, warning: Warning) -> None:
        self.warned.append(warning)


def test_a_changed_sigint_handler_is_put_back_and_named() -> None:
    item = Item()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        restore_ctrl_c(item)  # type: ignore[arg-type]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert len(item.warned) == 1 and "SIG_IGN" in str(item.warned[0])
        restore_ctrl_c(item)  # type: ignore[arg-type]
        assert len(item.warned) == 1  # Python's handler: nothing to say
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_run_begun_with_sigint_ignored_gets_pythons_handler_and_blames_no_test() -> None:
    item = Item()
    mine = lambda signum, frame: None  # noqa: E731 - a handler someone chose on purpose
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job starts
    try:
        take_ctrl_c()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        restore_ctrl_c(item)  # type: ignore[arg-type]
        assert item.warned == []
        signal.signal(signal.SIGINT, mine)
        take_ctrl_c()  # only "ignored" is taken for how the run began
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)
