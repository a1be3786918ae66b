"""Workloads: the factory protocol, knobs, definitions, built-ins and user workloads."""
