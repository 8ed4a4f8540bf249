"""The latency stage's wing, behind ``lodevem.predict``: one prediction is made here.

``pool`` (the one predictor pool of a run: every runtime, every kind, one cache) asks a predictor
kind (``kinds``: the seam and the estimator's kind; ``nnmeter``: nn-Meter's kind and its
regressors) for a ``records.LatencyPrediction``; the kinds read nn-Meter's kernel graph
(``kernels``) and lodevem's offline cost model (``estimator``, one ``Estimate`` per graph).
``calibration`` scales a finished cell, ``api`` is the Python API, ``cache`` the JSON cache,
``sklearn_compat`` the loader for nn-Meter's scikit-learn 0.23 pickles. Importing the package is
cheap: each module pulls in onnx, nn_meter or scikit-learn only when used."""
