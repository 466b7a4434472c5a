"""Stage 2, the pairs: hand-written (hack, clean) contrast pairs, or pairs the student writes itself (pairs.source self)."""
