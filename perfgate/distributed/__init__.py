"""Distributed training: launching ranks under torchrun, merging their results, communication."""
