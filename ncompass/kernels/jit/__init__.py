"""The ``@triton.jit`` kernels and their launchers, one module per kernel.

Importing any of these imports triton; the rest of ``ncompass.kernels`` imports them only when a
kernel is about to run.
"""
