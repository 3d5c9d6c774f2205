"""Real-browser tests: JupyterLab in headless Chromium (marked `browser`)."""
