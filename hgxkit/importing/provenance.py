"""The `hgxkit.io/*` labels and annotations `hgxkit recipe export` writes, read back into the imported recipe.

An export carries what proves the recipe beside the container it runs: the recipe's name and hash, the image
by tag and by digest, the model's Hub repo and commit, and the run that verified it (hgxkit.export.common,
`Provenance`). A compose service's labels and a Kubernetes workload's annotations hold them; the importer takes
them back: the image is the tag pinned to the digest when the file still runs that digest (else the file's own
image, with a note), the model's repo and commit are the mounted model's, the name is the recipe's, and the
recipe hash and the run go into `source.notes`. A value the file changed since the export is never taken over
the file's own.

Example:
    >>> labels = {"hgxkit.io/image-reference": "vllm/vllm-openai:v0.33.0", "hgxkit.io/image-digest": "sha256:"
    ...           + "1" * 64, "hgxkit.io/model-repo": "Qwen/Qwen3-8B", "other": "x"}
    >>> found = exported_by_hgxkit(labels)
    >>> found.image_for("vllm/vllm-openai@sha256:" + "1" * 64, "f:1", []).reference
    'vllm/vllm-openai:v0.33.0'
    >>> found.image_for("vllm/vllm-openai:latest", "f:1", notes := [])
    ImageRef(reference='vllm/vllm-openai:latest', digest=None)
    >>> print(notes[0])
    f:1: the file runs vllm/vllm-openai:latest, not the exported vllm/vllm-openai@sha256:1111…; its own image is taken
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hgxkit.imageref import normalized
from hgxkit.recipe.spec import ImageRef

PREFIX = "hgxkit.io/"


@dataclass(frozen=True)
class Exported:
    """What an hgxkit export says of the recipe it came from (each None when the file does not say)."""

    recipe: str | None = None
    recipe_hash: str | None = None
    image_reference: str | None = None
    image_digest: str | None = None
    model_repo: str | None = None
    model_revision: str | None = None
    run: str | None = None

    def image_for(self, image: str, where: str, notes: list[str]) -> ImageRef:
        """The recipe's image for a file that runs `image`: the exported tag at its digest when `image` is that
        digest, else `image` as the file gives it (noted when the export named another)."""
        if self.image_digest and self.image_reference:
            pinned = ImageRef(self.image_reference, self.image_digest)
            if normalized(image) == normalized(pinned.pinned()):
                return pinned
            notes.append(
                f"{where}: the file runs {image}, not the exported {pinned.pinned()[:-60]}…; its own image is taken"
            )
        return ImageRef(image)

    def source_note(self) -> str:
        """The sentence `source.notes` keeps: the recipe, its hash and the verifying run."""
        hashed = f" ({self.recipe_hash})" if self.recipe_hash else ""
        run = f"; verified by run {self.run}" if self.run else "; no verifying run named"
        return f"Exported by hgxkit from recipe {self.recipe or '(unnamed)'}{hashed}{run}."


def exported_by_hgxkit(labels: Mapping[str, object]) -> Exported | None:
    """The `hgxkit.io/*` entries of a label or annotation map, or None when there are none."""
    found = {str(k)[len(PREFIX) :]: str(v) for k, v in labels.items() if str(k).startswith(PREFIX) and v is not None}
    if not found:
        return None
    return Exported(
        recipe=found.get("recipe"),
        recipe_hash=found.get("recipe-hash"),
        image_reference=found.get("image-reference"),
        image_digest=found.get("image-digest"),
        model_repo=found.get("model-repo"),
        model_revision=found.get("model-revision"),
        run=found.get("verified-by-run") or found.get("run"),
    )
