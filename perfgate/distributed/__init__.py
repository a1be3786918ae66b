"""Distributed training: the process group a rank trains in, the torchrun agent, the ranks'
documents merged, their headline numbers (the parent's launch is ``perfgate.runner.launch``)."""
