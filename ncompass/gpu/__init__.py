"""GPU utilisation monitoring: ``gpu_profile``, ``GpuMonitor`` and ``GpuSummary``.

Watch utilisation, memory, power and temperature of one or more GPUs (through NVML or
nvidia-smi; the host CPU on machines without a GPU) while a function or block runs, and get a
summary. Nothing heavy is imported until a monitor starts.
"""

from ncompass.gpu._decorator import ProfiledResult, gpu_profile
from ncompass.gpu._errors import GpuBackendError
from ncompass.gpu._monitor import GpuMonitor
from ncompass.gpu._sample import DeviceSpec, GpuSample
from ncompass.gpu._summary import GpuSummary

__all__ = [
    "DeviceSpec",
    "GpuBackendError",
    "GpuMonitor",
    "GpuSample",
    "GpuSummary",
    "ProfiledResult",
    "gpu_profile",
]
