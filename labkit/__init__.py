"""labkit: the real code behind the Watermark Workbook.

Part one (`frontier`, `scenarios`, `explorer`) is the gap-free delivery frontier over a
priority-dispatched SQLite message log. Part two (`catalog`, `ballot`, `planner`) is the
catalog watermark with ballots. Notebooks, the figure build and the tests all import from here.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
