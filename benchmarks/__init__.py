"""`make bench`: the product measured as production runs it, every figure a ratio against a baseline taken in
the same run (scripts/bench/). Nothing here is imported by the product."""
