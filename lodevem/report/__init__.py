"""The report stage's wing, behind ``lodevem.reporter``: figures (``plots``) and the run's
environment manifest (``manifest``)."""
