"""An example team's training code, benchmarked through perfgate's workload protocol."""
