"""Loading a user's model file in the sandbox: sniffing its format and loading it (``formats``),
the user's own code and ``--arch`` architectures (``usercode``), TorchScript files and exported
programs as modules (``programs``), and the input shape a model is run with (``shapes``)."""
