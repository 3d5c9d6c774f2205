"""ipywidgets apps for the notebooks: controls in, labkit computes, a PNG comes out.

Every control carries a stable CSS class (`wb-...`) so the browser tests can find it.
"""
