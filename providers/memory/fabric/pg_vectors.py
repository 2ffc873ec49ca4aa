"""The vector side of recall on PostgreSQL: pgvector's HNSW index instead of a matrix in each process.

The SQLite engine keeps each scope's embeddings as a numpy matrix in the process that recalls (exact,
fast, and about 1.5 GB per process at a million 384-float notes). On PostgreSQL the database answers:
an HNSW index (cosine) on ``notes.embedding`` finds the nearest rows, filtered in the same statement
by what recall may see (scope, kind, status, validity at the instant asked, consent, revoked sources),
so a replica holds no vectors and no per-scope state at all. pgvector's iterative index scans keep
reading the graph until enough rows pass the filter.

The interface is the matrix index's (``mask``, ``top``, ``cosine``, ``above``, ``allowed_among``), so
recall and consolidation read the same on both engines; the score reported is the plain dot product,
as on SQLite. HNSW is approximate: recall's vector half may miss a row the exact matrix would rank in,
and over the hash embedder's sparse rows consolidation's ``above`` missed a fifth of near-duplicates
(docs/decisions/0014-fold-candidates.md).

The column and the index hold each vector at half precision, as a ``sparsevec`` for a sparse embedder
(the hash embedder) or a ``halfvec`` (a model's dense rows): :mod:`afi.storage.pg_vector_form` chose
it per store, and the store says which (``Store.vector_form``). Scores are the dot product of the
full-precision query with the stored vector, as the SQLite store computes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pgvector import SparseVector

from .consolidate import bag_survivors
from .embedders import HashEmbedder
from .types import Scope

if TYPE_CHECKING:
    from .store import Store

__all__ = ["PgMask", "PgVectorIndex"]

_HIDDEN = "afi_consent_state(n.consent)"
SEARCH_EFFORT = 64  # HNSW candidates a recall reads (pgvector's default is 40)
# A note to fold into is a near-duplicate (cosine 0.85 or more): the nearest few candidates hold it
FOLD_EFFORT = 40
# The sparse graph (m 12: afi.storage.pg_vector_form) needs a longer candidate list for the same
# answers: at 20k hash-embedded notes, 128 finds 86% of the exact top 10 (the halfvec graph at 64:
# 85%) and the nearest row of 97.5% of near-duplicates (at 40: 85%)
SPARSE_EFFORT = 128
# the embedder whose vectors the kept bags of words are (fold_bands.bag_blob)
_BAGS_NAME = HashEmbedder().name
# rowids a statement asks for: few enough of a large store that the planner reads them by the index
_ROWIDS_A_STATEMENT = 2_000


def _iso(epoch: float) -> str:
    if epoch == float("inf"):
        return "9999-12-31T23:59:59.999Z"
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class PgMask:
    """What recall may see, as SQL: the kinds, the instant, and whether consent is required."""

    kinds: tuple[str, ...]
    as_of: str
    require_consent: bool

    def where(self, scope: Scope, *, vectors: bool = True) -> tuple[str, list[Any]]:
        """The condition, as SQL over ``notes n``; ``vectors``: only the rows that have their vector (a
        note written moments ago may not yet: the word signals pass it all the same)."""
        consent = f"{_HIDDEN} = 1" if self.require_consent else f"{_HIDDEN} <> 2"
        sql = (
            "n.tenant_id = ? AND n.resource_id = ? AND n.thread_id = ? AND n.status = 'active' "
            f"{'AND n.embedding IS NOT NULL ' if vectors else ''}AND n.kind = ANY(?) "
            "AND (n.valid_from IS NULL OR n.valid_from <= ?) AND (n.valid_to IS NULL OR n.valid_to > ?) "
            f"AND {consent} AND (n.source_entry_ids IS NULL OR n.source_entry_ids = '[]' OR NOT EXISTS ("
            "SELECT 1 FROM source_lineage l WHERE l.tenant_id = n.tenant_id AND l.resource_id = n.resource_id "
            "AND l.thread_id = n.thread_id "
            "AND l.entry_id IN (SELECT jsonb_array_elements_text(n.source_entry_ids::jsonb))))"
        )
        return sql, [scope.tenant_id, scope.resource_id, scope.thread_id, list(self.kinds), self.as_of, self.as_of]


class PgVectorIndex:
    """One scope's view of the database's HNSW index (nothing of it is held in this process)."""

    def __init__(self, store: Store, scope: Scope, dims: int) -> None:
        self.store = store
        self.scope = scope
        self.dims = int(dims)
        self.form = store.vector_form
        self.lock = contextlib.nullcontext()  # the database orders concurrent recalls itself

    in_database = True  # the mask is SQL: recall asks the database for both rankings, filtered

    def refresh(self) -> None:
        """Nothing to bring up to date (every query reads the database as it is) but the embedder: raises
        MemoryValidationError when the store's vectors were moved to another one meanwhile."""
        self.store.check_vectors()

    def mask(self, kinds: Sequence[str], as_of: float, require_consent: bool) -> PgMask:
        return PgMask(tuple(kinds), _iso(as_of), require_consent)

    def _vector(self) -> str:
        """The stored vector, in the type the query is compared with (full precision for a dense one)."""
        return (
            f"n.embedding::sparsevec({self.dims})" if self.form == "sparsevec" else f"n.embedding::vector({self.dims})"
        )

    def _query(self, query: npt.NDArray[np.float32]) -> tuple[str, Any]:
        """The query's cast and its value, in the stored vector's type (full precision)."""
        vector = np.asarray(query, dtype=np.float32)
        if self.form == "sparsevec":
            return f"sparsevec({self.dims})", SparseVector(vector)
        return f"vector({self.dims})", vector

    def top(self, query: npt.NDArray[np.float32], mask: PgMask, limit: int, *, effort: int = SEARCH_EFFORT
            ) -> list[tuple[int, float]]:  # fmt: skip
        """Up to ``limit`` ``(rowid, dot)`` of the rows the mask lets through, nearest first;
        ``effort`` is the HNSW candidate list (``hnsw.ef_search``) for this query alone (at least
        ``SPARSE_EFFORT`` over a sparse graph)."""
        if limit <= 0:
            return []
        if self.form == "sparsevec":
            effort = max(effort, SPARSE_EFFORT)
        where, params = mask.where(self.scope)
        cast, vector = self._query(query)
        indexed = f"{self.form}({self.dims})"
        sql = (
            f"SELECT n.rowid, -({self._vector()} <#> ?::{cast}) FROM notes n WHERE {where} "
            f"ORDER BY n.embedding::{indexed} <=> ?::{indexed} LIMIT ?"
        )
        with self.store.read() as conn:
            # the connection's setting, then the search, in one round trip: every search sets its own
            with conn.raw.pipeline():  # type: ignore[attr-defined]
                conn.execute("SELECT set_config('hnsw.ef_search', ?, false)", (str(max(effort, limit)),))
                cursor = conn.execute(sql, [vector, *params, vector, limit])
            rows = cursor.fetchall()
        found = [(int(rowid), float(dot)) for rowid, dot in rows]
        found.sort(key=lambda item: -item[1])  # an iterative scan's order is relaxed
        return found

    def words(self, terms: list[str], mask: PgMask, limit: int) -> list[int]:
        """The best ``limit`` rowids by BM25 of the rows holding any of the terms that the mask lets
        through (with or without their vector), in one statement."""
        where, params = mask.where(self.scope, vectors=False)
        with self.store.read() as conn:
            return self.store.notes.lexical(conn, self.scope, terms, valid=where, params=params, limit=limit)

    def above(self, query: npt.NDArray[np.float32], threshold: float, kinds: Sequence[str], as_of: float,
              require_consent: bool, *, limit: int = 32) -> list[tuple[int, float]]:  # fmt: skip
        """``(rowid, dot)`` of up to ``limit`` recallable rows whose dot product reaches ``threshold``."""
        nearest = self.top(query, self.mask(kinds, as_of, require_consent), limit, effort=FOLD_EFFORT)
        return [(rowid, dot) for rowid, dot in nearest if dot >= threshold]

    def above_among(self, query: npt.NDArray[np.float32], rowids: Sequence[int], threshold: float,
                    kinds: Sequence[str], as_of: float, require_consent: bool, *, limit: int = 32
                    ) -> list[tuple[int, float]]:  # fmt: skip
        """:meth:`above` over those rowids only, exactly (rows of other scopes, or not recallable, are left out)."""
        rowids = self._near_by_bags({0: rowids}, query[None, :], threshold)[0]
        if not rowids:
            return []
        where, params = self.mask(kinds, as_of, require_consent).where(self.scope)
        cast, vector = self._query(query)
        sql = f"SELECT n.rowid, -({self._vector()} <#> ?::{cast}) FROM notes n WHERE n.rowid = ANY(?) AND {where}"
        with self.store.read() as conn:
            rows = conn.execute(sql, [vector, list(rowids), *params]).fetchall()
        found = [(int(rowid), float(dot)) for rowid, dot in rows if float(dot) >= threshold]
        return sorted(found, key=lambda item: -item[1])[:limit]

    def near_among_many(self, queries: npt.NDArray[np.float32], candidates: Mapping[int, Sequence[int]],
                        kinds: Mapping[int, str], threshold: float, as_of: float, require_consent: bool
                        ) -> set[int]:  # fmt: skip
        """Of the keys of ``candidates`` (rows of ``queries``), those for which :meth:`above_among` of
        their own rowids and kind finds a row: the candidates' vectors read a kind at a time, 2,000 rowids a
        statement (a many-note remember's fold)."""
        candidates = self._near_by_bags(candidates, queries, threshold)
        near: set[int] = set()
        for kind in sorted(set(kinds.values())):
            asking = [at for at in candidates if kinds[at] == kind and candidates[at]]
            every = sorted({rowid for at in asking for rowid in candidates[at]})
            if not every:
                continue
            where, params = self.mask([kind], as_of, require_consent).where(self.scope)
            rows = []
            with self.store.read() as conn:
                for start in range(0, len(every), _ROWIDS_A_STATEMENT):  # each statement read by the index
                    rows += conn.execute(f"SELECT n.rowid, n.embedding FROM notes n WHERE n.rowid = ANY(?) AND {where}",
                                         [every[start : start + _ROWIDS_A_STATEMENT], *params]).fetchall()  # fmt: skip
            if not rows:
                continue
            slot = {int(rowid): at for at, (rowid, _) in enumerate(rows)}
            matrix = np.vstack([np.asarray(vector.to_numpy(), dtype=np.float32) for _, vector in rows])
            for at in asking:
                held = [slot[rowid] for rowid in candidates[at] if rowid in slot]
                if held and float(np.max(matrix[held] @ queries[at])) >= threshold:
                    near.add(at)
        return near

    def _near_by_bags(self, candidates: Mapping[int, Sequence[int]], queries: npt.NDArray[np.float32],
                      threshold: float) -> Mapping[int, Sequence[int]]:  # fmt: skip
        """Of each query's candidate rowids, those its vector may reach ``threshold`` with, judged by their
        kept bags of words when those are this store's vectors (the hash embedder's): a bag is 86 bytes
        where a note's row is ~2 KB, and a candidate scored far by it is no nearer by its vector. The
        candidates unchanged in a store of another embedder, and each one without a kept bag kept."""
        if self.store.embedder_name != _BAGS_NAME:
            return candidates
        every = sorted({rowid for rowids in candidates.values() for rowid in rowids})
        kept = self.store.bags_by_rowid(every) if every else {}
        return {at: bag_survivors(kept, queries[at], rowids, threshold) for at, rowids in candidates.items()}

    def cosine(self, query: npt.NDArray[np.float32], rowids: Sequence[int]) -> dict[int, float]:
        """The dot product of the query with each of those rows that has an embedding."""
        if not rowids:
            return {}
        cast, vector = self._query(query)
        sql = (
            f"SELECT n.rowid, -({self._vector()} <#> ?::{cast}) FROM notes n "
            "WHERE n.rowid = ANY(?) AND n.embedding IS NOT NULL"
        )
        with self.store.read() as conn:
            rows = conn.execute(sql, [vector, list(rowids)]).fetchall()
        return {int(rowid): float(dot) for rowid, dot in rows}

    def allowed_among(self, rowids: Sequence[int], mask: PgMask) -> set[int]:
        """Those of the rowids that the mask lets through."""
        if not rowids:
            return set()
        where, params = mask.where(self.scope, vectors=False)
        sql = f"SELECT n.rowid FROM notes n WHERE n.rowid = ANY(?) AND {where}"
        with self.store.read() as conn:
            return {int(row[0]) for row in conn.execute(sql, [list(rowids), *params]).fetchall()}
