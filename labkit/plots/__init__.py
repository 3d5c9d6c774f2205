"""Plot functions shared by the notebooks, the figure build and the tests.

Every function takes data labkit computed (a DataFrame or a dataclass) and returns a
matplotlib Figure; nothing here computes frontiers or commits ballots itself.
"""
