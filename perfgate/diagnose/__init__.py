"""What bounds a workload: the signals that decide it, and the classification."""
