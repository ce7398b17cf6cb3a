"""Command-line entry points of `python -m components` (see `components/__main__.py`)."""
