"""Code rewrites of the kernel body, one family per module (``coderewrites.py`` lists
them): each a ``rewrites(an)`` over a ``rewrites.Rewrites`` analysis of the source,
returning (key, description, edits) per variant it proposes."""
