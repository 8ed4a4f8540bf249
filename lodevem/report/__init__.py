"""The report stage's wing, behind ``lodevem.reporter``: the display form of a row (``cells``),
the console tables (``console``), CSV/JSON/LaTeX (``files``), figures (``plots``) and the run's
environment manifest (``manifest``). Nothing here imports ``lodevem.reporter``."""
