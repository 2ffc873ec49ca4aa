"""Notes for the consolidation tests: prose-like word lists (a few common words, many rare), each
named by its last word, and the same note said a little differently."""

from __future__ import annotations

import random

__all__ = ["edited", "prose_notes"]

_SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "qu", "bo", "di", "fe", "gu", "ho"]


def _vocabulary(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))))
    return sorted(words)


def prose_notes(n: int, seed: int) -> list[str]:
    """n notes of 12–20 words drawn unevenly (a few common, many rare), as prose is; note i ends ``item<i>``."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(3000, seed)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    return [" ".join(rng.choices(vocabulary, weights, k=rng.randint(12, 20))) + f" item{i}" for i in range(n)]


def edited(text: str, rng: random.Random) -> str:
    """The same note said a little differently: one word dropped, replaced or added (the last word,
    which names the note, stays)."""
    words = text.split()
    at = rng.randrange(len(words) - 1)
    match rng.randrange(3):
        case 0:
            del words[at]
        case 1:
            words[at] = "newly"
        case _:
            words.insert(at, "indeed")
    return " ".join(words)
