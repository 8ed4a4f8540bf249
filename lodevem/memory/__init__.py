"""The memory stage's pure logic: which RAM limits a run measures and which rows it infers
(``planning``), the verdict rules (``verdicts``), the order the runs go in (``schedule``). No
Docker, no files of its own: unit-tested on its own."""
