"""Red team, round 3 (issue 26): cases written against the code as it stood before the
round-3 fixes. See README.md in this folder for the corpus, the baseline and which
defence closes each case."""
