"""Take a recipe elsewhere: compose, Kubernetes, SkyPilot and Slurm exports (registry: hgxkit/export/registry.py)."""
