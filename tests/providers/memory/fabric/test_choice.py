"""Which embedder a store opens with: the one it records, a named one, or the default for a new store."""

from __future__ import annotations

from pathlib import Path

import pytest

from afi.providers.memory import HashEmbedder, MemoryValidationError, OnnxMiniLM, create_memory
from afi.providers.memory.fabric.choice import EmbedderChoice, embedder_named, short_name
from afi.providers.memory.provider import MemoryProvider


@pytest.mark.parametrize(
    ("name", "made"),
    [("minilm", "minilm-l6-v2-int8"), ("hash", "hash-fnv1a-384"), ("minilm-l6-v2-int8", "minilm-l6-v2-int8"),
     ("hash-fnv1a-384", "hash-fnv1a-384"), ("hash-fnv1a-256", "hash-fnv1a-256")],
)  # fmt: skip
def test_a_person_or_a_store_names_an_embedder(name: str, made: str) -> None:
    assert embedder_named(name).name == made
    assert short_name(made) in ("minilm", "hash", made)


@pytest.mark.parametrize("name", ["", "auto", "word2vec", "hash-fnv1a-", "hash-fnv1a-0384", "hash-fnv1a-x",
                                  "minilm-l6-v2", "hash-fnv1a-99999"])  # fmt: skip
def test_a_name_no_embedder_answers_to_is_refused(name: str) -> None:
    with pytest.raises(MemoryValidationError):
        embedder_named(name)


def test_a_new_store_gets_the_default_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    assert isinstance(EmbedderChoice(default="minilm").resolve(None), OnnxMiniLM)
    assert EmbedderChoice().resolve(None).name == "hash-fnv1a-384"  # the library's default
    memory = create_memory(tmp_path / "old.db", tenant_id="t", resource_id="r", thread_id="t",
                           embedder=HashEmbedder(256))  # fmt: skip
    memory.close()
    # opened again without a choice, from the library or the afi command's default: its own embedder
    again = create_memory(tmp_path / "old.db", tenant_id="t", resource_id="r", thread_id="t")
    assert again.embedder.name == "hash-fnv1a-256"
    again.close()
    provider = MemoryProvider(tmp_path / "old.db", tmp_path / "files", embedder=EmbedderChoice(default="minilm"))
    assert provider.embedder().name == "hash-fnv1a-256"
    assert provider.manifest().model_dump(by_alias=True)["x-embedder"] == {"name": "hash-fnv1a-256", "dims": 256}


def test_a_named_embedder_the_store_was_not_made_with_is_refused_naming_both(tmp_path: Path) -> None:
    create_memory(tmp_path / "hash.db", tenant_id="t", resource_id="r", thread_id="t").close()
    provider = MemoryProvider(tmp_path / "hash.db", tmp_path / "files", embedder=EmbedderChoice("minilm"))
    with pytest.raises(MemoryValidationError) as refused:
        provider.check_embedder()
    assert "'hash-fnv1a-384'" in str(refused.value) and "'minilm-l6-v2-int8'" in str(refused.value)


def test_a_store_of_an_embedder_this_afi_lacks_says_how_to_move_it(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "old.db", tenant_id="t", resource_id="r", thread_id="t")
    with memory.store.write() as conn:  # as the removed torch extra recorded it
        conn.execute("UPDATE meta SET value = 'minilm-l6-v2' WHERE key = 'embedder'")
    memory.close()
    with pytest.raises(MemoryValidationError, match="afi db reembed --embedder minilm"):
        create_memory(tmp_path / "old.db", tenant_id="t", resource_id="r", thread_id="t")


def test_a_store_first_opened_in_a_refused_write_records_its_embedder_with_its_first_vector(tmp_path: Path) -> None:
    """The record a new store makes when it opens is part of the transaction it opened in: a refused
    first write rolls it back, and the first vector written records it again."""
    import sqlite3

    from afi.provider import Caller

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    owner = Caller(principal="local", space="default")
    with pytest.raises(MemoryValidationError):
        provider.remember(owner, kind="fact", content="tagged", tags=["a\x00b"])
    provider.remember(owner, kind="fact", content="the next write is stored")
    with sqlite3.connect(tmp_path / "afi.db") as conn:
        recorded = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
    assert recorded == {"embedder": "hash-fnv1a-384", "dims": "384"}
