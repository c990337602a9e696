"""Hercules: trustworthy evaluation, optimisation and compilation of LLM-written CUDA kernels."""

__version__ = "0.1.0"
