"""The DCGM exporter stand-in for simulated nodes (SIMULATED): NVIDIA's metric names from the simulated GPUs."""
