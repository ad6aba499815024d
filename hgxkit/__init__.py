"""hgxkit: reproduce LLM serving setups on NVIDIA HGX-H200 nodes, and prove them with archived benchmarks."""

__version__ = "0.1.0"
