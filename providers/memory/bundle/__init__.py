"""The lossless bundle (``afi export`` / ``afi import``): spaces of a store as a git-friendly folder.

``layout`` says where each thing lives, ``markdown`` how notes and blocks are written, ``collect``
reads a space out of a store, ``write`` writes the folder and its manifest, ``read`` checks and
parses one back, ``apply`` writes it into an empty space, ``history`` carries workspace file versions,
and ``run`` ties them to the provider's verbs. docs/bundle.md describes the format.
"""

from __future__ import annotations

from .layout import FORMAT, MANIFEST, VERSION
from .run import ImportResult, export_bundle, import_bundle

__all__ = ["FORMAT", "MANIFEST", "VERSION", "ImportResult", "export_bundle", "import_bundle", "is_bundle"]


def is_bundle(path: object) -> bool:
    """Whether a folder looks like an afi bundle: a manifest naming a format (this one, or another that
    import then refuses by name), or the bundle's own folders (a bundle whose manifest went missing is
    still refused as a bundle, not read as another format)."""
    import json
    from pathlib import Path

    folder = Path(str(path))
    if not folder.is_dir():
        return False
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            found = json.loads(manifest.read_bytes())
        except (ValueError, UnicodeDecodeError, RecursionError):  # read_manifest says what is wrong
            return True
        return isinstance(found, dict) and ("format" in found or "checksums" in found)
    return (folder / "spaces").is_dir()
