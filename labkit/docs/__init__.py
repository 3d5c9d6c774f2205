"""The docs build: `figures` (python -m labkit figures), `figure_specs` (what each figure
shows) and `nbfiles` (strip outputs, student copies).
"""
