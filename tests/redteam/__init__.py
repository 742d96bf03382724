"""Red-team suite: escape payloads (escapes/), screen rewrites (correct_rewrites*),
and the evaluation corpus (kernels/, wrong/, correct_eval/, loaded by corpus.py)."""
