"""Compression levels derived in the sandbox (``variants``), the sparsity of a pruned file
(``sparsity``) and the fine-tuning of a pruned variant (``finetune``)."""
