"""How a PostgreSQL store keeps its embeddings: ``sparsevec`` for a sparse embedder, ``halfvec`` otherwise.

The hash embedder (``hash-fnv1a-<dims>``) gives each note about 21 non-zero components of 384. As a
``halfvec`` such a row is 776 bytes in the table and about 1.2 KB a note in the HNSW graph; as a
``sparsevec`` (the non-zero components only) it is about 190 bytes, and the graph about 440 bytes a
note, quicker to insert into and to walk. A model's rows (MiniLM) are dense and stay ``halfvec``.

The column's type in the catalog is the record of the choice: every reader and writer asks it
(:func:`column_form`), so they cannot disagree. Either way each component is a half-precision number
(a ``sparsevec`` holds ``float32`` values, written rounded to ``float16``), the same numbers the SQLite
store keeps, so ``afi db copy`` between the engines stays exact. The choice follows from the embedder
recorded in ``meta``: a store is converted when it first knows its embedder (at its first open, or at
migration step 9 for a store made before), see :func:`settle_vector_form`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pgvector import HalfVector, SparseVector

__all__ = [
    "HNSW_PREFIX",
    "SPARSE_MAX_DIMS",
    "VectorForm",
    "column_form",
    "column_value",
    "create_hnsw",
    "hnsw_name",
    "hold_vectors",
    "replace_vector_column",
    "settle_vector_form",
    "wanted_form",
]

VectorForm = Literal["halfvec", "sparsevec"]

HNSW_PREFIX = "notes_embedding_hnsw_"
# pgvector's HNSW indexes a sparsevec of at most 1,000 non-zero components: within that whatever the text
SPARSE_MAX_DIMS = 1000
_SPARSE_EMBEDDERS = ("hash-fnv1a-",)
_VECTORS_LOCK = 0x0AF1_4E5D  # pg_advisory_xact_lock key: one process changes the vector column at a time
_SUFFIX: dict[VectorForm, str] = {"halfvec": "half", "sparsevec": "sparse"}


def wanted_form(embedder: str | None, dims: int) -> VectorForm:
    """The form for a store whose vectors come from ``embedder`` (None: not known yet, dense)."""
    sparse = embedder is not None and embedder.startswith(_SPARSE_EMBEDDERS) and dims <= SPARSE_MAX_DIMS
    return "sparsevec" if sparse else "halfvec"


def column_form(conn: Any) -> VectorForm:
    """The form ``notes.embedding`` has in this database (psycopg connection or the engine's)."""
    row = conn.execute(
        "SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = to_regclass('notes') AND a.attname = 'embedding' AND NOT a.attisdropped"
    ).fetchone()
    return "sparsevec" if row is not None and row[0] == "sparsevec" else "halfvec"


def column_value(vector: npt.ArrayLike, form: VectorForm) -> HalfVector | SparseVector:
    """An embedding as the column keeps it: each component rounded to half precision, in that form."""
    half = np.asarray(vector, dtype=np.float32).astype(np.float16).astype(np.float32)
    return SparseVector(half) if form == "sparsevec" else HalfVector(half)


def hnsw_name(form: VectorForm, dims: int) -> str:
    """The HNSW index's name for that form and size (older stores' ``_half_`` index keeps its name)."""
    return f"{HNSW_PREFIX}{_SUFFIX[form]}_{int(dims)}"


def _recorded_embedder(conn: Any) -> tuple[str | None, int | None]:
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
    dims = rows.get("dims")
    return rows.get("embedder"), int(dims) if dims is not None and str(dims).isdigit() else None


def settle_vector_form(conn: Any, *, index: bool = True) -> VectorForm:
    """Give ``notes.embedding`` the form the recorded embedder calls for, converting the rows and
    replacing the HNSW index if it has another; with ``index``, build the HNSW index if it is missing.
    Returns the column's form. Run inside a transaction (it takes an advisory lock for its changes)."""
    embedder, dims = _recorded_embedder(conn)
    form = column_form(conn)
    if dims is None:
        return form
    want = wanted_form(embedder, dims)
    if want == form and (not index or _exists(conn, hnsw_name(form, dims))):
        return form
    conn.execute(f"SELECT pg_advisory_xact_lock({_VECTORS_LOCK})")
    form = column_form(conn)  # another process may have settled it meanwhile
    if want != form:
        _drop_hnsw(conn)
        conn.execute(f"ALTER TABLE notes ALTER COLUMN embedding TYPE {want} USING embedding::{want}")
        form = want
    if index:
        create_hnsw(conn, form, dims)
    return form


def hold_vectors(conn: Any) -> None:
    """Hold the vector column and the notes table to the end of the transaction: the lock every change
    of the column takes (first, as :func:`settle_vector_form` does), then the table, so no one reads or
    writes a note until the transaction ends."""
    conn.execute(f"SELECT pg_advisory_xact_lock({_VECTORS_LOCK})")
    conn.execute("LOCK TABLE notes IN ACCESS EXCLUSIVE MODE")


def replace_vector_column(conn: Any, form: VectorForm, dims: int) -> None:
    """Make way for a new vector of ``dims`` in every row (``afi db reembed``, after :func:`hold_vectors`):
    drop every HNSW index and, when the column has another form or its vectors another size, give it
    ``form`` with every row's vector NULL. The caller then writes every row's vector and calls
    :func:`create_hnsw`, in the same transaction.

    The NULLs are needed: building an index evaluates its cast (``embedding::sparsevec(384)``) on the
    row versions this transaction replaced as well, and a vector of the old size there fails it. The
    column's rewrite leaves those versions without one.
    """
    _drop_hnsw(conn)
    if column_form(conn) != form or _recorded_embedder(conn)[1] != dims:
        conn.execute(f"ALTER TABLE notes ALTER COLUMN embedding TYPE {form} USING NULL::{form}")


def _drop_hnsw(conn: Any) -> None:
    for (name,) in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'notes' "
        f"AND left(indexname, {len(HNSW_PREFIX)}) = '{HNSW_PREFIX}'"
    ).fetchall():
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')


# pgvector's default graph (m 16, ef_construction 64) over sparse rows cost 7.6 ms an insert at 20k
# notes against 1.8 ms for this one (2.9 ms for the halfvec graph); recall reads a longer candidate
# list from it instead (fabric pg_vectors.SPARSE_EFFORT) for answers as good as the halfvec graph's
_GRAPH: dict[VectorForm, str] = {"halfvec": "", "sparsevec": " WITH (m = 12, ef_construction = 40)"}


def create_hnsw(conn: Any, form: VectorForm, dims: int) -> None:
    """Create the HNSW (cosine) index over the column in that form, if it is not there."""
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {hnsw_name(form, dims)} ON notes "
        f"USING hnsw ((embedding::{form}({int(dims)})) {form}_cosine_ops){_GRAPH[form]}"
    )


def _exists(conn: Any, name: str) -> bool:
    found = conn.execute(f"SELECT to_regclass('{name}')").fetchone()
    return found is not None and found[0] is not None
