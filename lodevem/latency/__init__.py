"""The latency stage's wing, behind ``lodevem.predict``: nn-Meter's kernel graph (``kernels``),
lodevem's offline cost model (``estimator``), nn-Meter's regressors (``nnmeter``) and the loader
for their scikit-learn 0.23 pickles (``sklearn_compat``). Importing the package is cheap: each
module pulls in onnx, nn_meter or scikit-learn only when used."""
