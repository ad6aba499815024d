"""Knobs of the docker role (inventory data overrides each).

docker_source        "docker-ce" (Docker's repository), "docker.io" (the distribution's package), or "auto":
                     docker-ce on Ubuntu, docker.io on Debian (and where Docker's repository is unreachable,
                     as on the simulated nodes). Never the snap: `--gpus` does not work with it.
docker_repo_url      Docker's repository or a mirror; None: https://download.docker.com/linux/ubuntu
docker_repo_key_url  its key; None: <docker_repo_url>/gpg
docker_version       pin docker-ce and docker-ce-cli (e.g. "5:28.5.1-1~ubuntu.24.04~noble"); None: newest.
"""

DEFAULTS = {
    "docker_source": "auto",
    "docker_repo_url": None,
    "docker_repo_key_url": None,
    "docker_version": None,
}

DOCKER_CE_PACKAGES = ["docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin", "docker-compose-plugin"]
# Docker's install guide removes these before installing docker-ce.
CONFLICTING_PACKAGES = [
    "docker.io",
    "docker-compose",
    "docker-compose-v2",
    "docker-doc",
    "podman-docker",
    "containerd",
    "runc",
]
KEYRING = "/etc/apt/keyrings/docker.asc"
SOURCES_FILE = "/etc/apt/sources.list.d/docker.sources"
