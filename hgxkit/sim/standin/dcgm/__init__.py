"""The DCGM exporter stand-in for simulated nodes (SIMULATED): NVIDIA's metric names from the simulated GPUs.

Not listed in hgxkit/sim/standin/__init__.py's docstring on purpose: that file is part of the serving stand-ins'
image hash, and editing it rebuilds and republishes them for every session sharing the registry storage.
"""
