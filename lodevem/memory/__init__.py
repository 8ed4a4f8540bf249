"""The memory stage's pure logic: which RAM limits a run measures and which rows it infers
(``planning``). No Docker, no files: unit-tested on its own."""
