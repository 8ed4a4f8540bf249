"""Data files lodevem ships: fitted parameters, shipped profiles, references and SoC facts.

A package only so that they are installed with the code: nothing here is imported. Each file
is read by path by the module that owns it: ``latency.estimator`` (estimator_params.json),
``latency.armsim`` (armsim_params.json, the shipped armsim_*_profiles.json), ``latency.kernels``
(nn-Meter's fusion rules), ``report.paperkit`` (references.json) and ``socs`` (socs.yaml).
"""
