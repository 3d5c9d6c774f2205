"""The run keeps Ctrl-C Python's for the tests that press it (tests/ctrl_c.py): a test that
leaves SIGINT's handler changed has it put back, with a warning naming it."""

from __future__ import annotations

import signal

from ctrl_c import restore_ctrl_c


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
