"""The simulated HGX-H200 node: real systemd/SSH/Docker, simulated NVIDIA hardware (`simulated: true`)."""
