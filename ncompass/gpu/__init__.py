"""GPU utilisation monitoring: gpu_profile, GpuMonitor and GpuSummary."""
