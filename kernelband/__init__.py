"""KernelBand: hardware-aware hierarchical-bandit optimization of Triton kernels."""

__version__ = "0.1.0"
