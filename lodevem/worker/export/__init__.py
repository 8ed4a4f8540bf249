"""Making files from a loaded model: the ONNX export and its float twin (``onnx_export``,
``onnx_twin``, ``quantized``), and what the runtimes' conversions share (``convert``: the load and
check, the reply's section; ``calibration``: int8 calibration inputs; ``artifact_info``: what a
converted file is, read from its bytes). Each runtime's converter is in its folder
(``lodevem/runtimes/<name>/convert.py``)."""
