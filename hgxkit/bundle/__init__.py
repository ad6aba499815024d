"""Air-gapped sites: a bundle carries every package, image, model file and wheel a node needs for one recipe."""
