"""The memory stage's logic below its face (``measure``): what to run, in what order, and what it means.

Which RAM limits a run measures and which rows it infers (``planning``), the order the runs go in
and the floor's search (``schedule``), the verdict rules (``verdicts``) and the measurements kept
in the artifact store (``cache``). No Docker here: the runs themselves are the face's, handed in.
"""
