"""armsim: latency from the runtime's own Arm instructions, counted on an emulated core.

The host's half, a predictor kind like the others (``kind``, ``predictor``): the ISA each phone
core is emulated with (``isa``), the instruction profiles made in the armsim sandbox and cached
(``profiler``; those shipped for the zoo models: ``shipped``), the per-core cost model that
prices them (``costmodel``) and its methods sentence (``paper``). The guest side runs in the
armsim image (``worker/armsim``).
"""
