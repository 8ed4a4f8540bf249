"""armsim's container side: the ``armsim-profile`` action (``armsim_profile``), the script the
emulated Arm Python runs (``armsim_guest``, run by path, stdlib only), and the pricing of what it
executed (``armsim_blocks``, ``armsim_symbols``, ``armsim_inorder``, ``armsim_cores``, ``armsim_arm32``)."""
