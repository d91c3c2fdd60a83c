"""Ground floor of torchdroid: pins, errors, the one subprocess runner, records, logging.

Every stage package (converter, ndk_build, appgen, deploy, host_nnapi) stands on
this package and talks to the others only through the records in
:mod:`toolchain.records`.  Nothing here imports torch.
"""

__version__ = "0.1.0"
