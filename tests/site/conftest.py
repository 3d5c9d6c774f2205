"""The static site's tests run only when asked for (`pytest -m site`, i.e. `make site-test`).

They need the site tools and a built site, so plain `pytest` (`make test`, the developer loop)
deselects them; CI runs them in their own step after `make site` (SPEC section 10).
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the `site` tests unless the -m expression names them."""
    if "site" in (config.getoption("markexpr") or ""):
        return
    dropped = [item for item in items if item.get_closest_marker("site")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker("site")]
