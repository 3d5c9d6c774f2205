"""Tests that press Ctrl-C (`_thread.interrupt_main`, tests/test_remote.py) need SIGINT to be
Python's: where another handler is set, interrupt_main does nothing. Late in full runs on
6 December two of them failed so ("DID NOT RAISE KeyboardInterrupt") after something else in
that worker had left SIGINT changed. tests/conftest.py calls `restore_ctrl_c` after each test:
the handler is put back, and the test that changed it gets a warning in the run's summary.
A run started in the background by a shell without job control (a script's `make test &`)
inherits SIGINT ignored, which Python keeps: `take_ctrl_c` gives it Python's handler first, so
no test is blamed for how the run began."""

from __future__ import annotations

import signal
import threading
from typing import Any


def take_ctrl_c() -> None:
    """Give SIGINT Python's handler where the process started with it ignored (a background job)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def restore_ctrl_c(item: Any) -> None:
    """Put SIGINT's handler back to Python's if `item` (a pytest item) left it changed."""
    if threading.current_thread() is not threading.main_thread():
        return
    found = signal.getsignal(signal.SIGINT)
    if found is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        item.warn(UserWarning(f"left SIGINT's handler as {found!r}; put back"))
