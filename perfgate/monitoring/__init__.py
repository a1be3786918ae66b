"""Monitoring: perfgate's measurements as Prometheus series (export, Pushgateway push), and a
live training job's telemetry served for Prometheus to scrape (``perfgate monitor``)."""
