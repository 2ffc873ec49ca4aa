"""The store's side of consolidation's SimHash bands (:mod:`.fold_bands`): the rows kept, and the lookup.

A scope has no bands until it holds ``CENTRE_ROWS`` notes: the write that brings it there gives it its
centre (the mean of its first notes' bags of words), bands the rows it brings and marks every row held
before it as still to band (``unbanded_upto``, the highest such rowid). From then on each new row is
banded in its own write, and each write transaction of the scope also bands up to ``BACKFILL_ROWS`` of
the older rows, newest first, lowering the mark; a store made before the bands catches up this way, a
few milliseconds a write, and never at open. Until the mark reaches 0 the fold searches as it did
without bands.

Each banded row also keeps its bag of words (``note_bags``, :func:`~.fold_bands.bag_blob`): the fold
scores a band's candidates by them first and reads the text of only those near enough.

A row rewritten with another content has its old bands and bag deleted and its new ones written; a
row deleted has its bands and bag deleted (``afi gc``'s deletes too: :func:`unband_rows`). A band row
that named a version gone or changed would be harmless anyway: every candidate is scored against the
row as it is.

Mixed into :class:`~.store.Store`, whose connections and transaction hooks it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from afi.storage.database import Connection
from afi.storage.engine import Engine

from . import fold_bands
from .lexical import has_words
from .rows import _scope_key
from .types import Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["BACKFILL_ROWS", "MAX_CANDIDATES", "BandRows", "unband_rows"]

# older rows banded a write transaction while a scope catches up (about 10 ms of a write on SQLite)
BACKFILL_ROWS = 500
# more candidates than this from the bands (many notes of nearly one text), and the fold searches without them
MAX_CANDIDATES = 4_096
# probe codes a lookup statement: PostgreSQL reads a batch's 24,000 codes 4x faster in chunks of 2,000
# than in one list (1M notes: 0.34 against 1.44 s, the same index-only plan); SQLite is indifferent
_CODES_A_STATEMENT = 2_000
# rowids a statement reads bags of (within SQLite's 32,766 parameters)
_ROWIDS_A_STATEMENT = 30_000
_PUT_BAG = (
    "INSERT INTO note_bags (note_rowid, bag) VALUES (?, ?) ON CONFLICT (note_rowid) DO UPDATE SET bag = excluded.bag"
)
_SCOPE = "tenant_id = ? AND resource_id = ? AND thread_id = ?"
_STATE = "SELECT unbanded_upto FROM note_band_centres WHERE scope = ?"


class BandRows:
    """Each note's SimHash bands, written and deleted with it, and the fold's lookup of them."""

    if TYPE_CHECKING:

        def read(self) -> AbstractContextManager[Connection]: ...
        def on_transaction_end(self, hook: Callable[[int, bool], None]) -> None: ...
        def uncommitted_tx(self) -> int | None: ...
        def write(self, scope: Scope | None = None) -> AbstractContextManager[Connection]: ...
        def scope_rows(self) -> str: ...

        engine: Engine

    def _init_bands(self) -> None:
        # False: the fold searches as it did before the bands (bench.fold's baseline); rows are banded still
        self.fold_bands = True
        self._centres: dict[int, npt.NDArray[np.float64]] = {}
        self._whole: set[int] = set()  # the scopes whose rows are all banded
        self._backfilled_tx: int | None = None
        self.on_transaction_end(self._bands_after)

    def _bands_after(self, tx: int, committed: bool) -> None:
        """A centre or a mark read in a transaction that rolled back may never have been: read them again."""
        if not committed:
            self._centres.clear()
            self._whole.clear()

    def _band_state(self, conn: Connection, key: int) -> tuple[npt.NDArray[np.float64], int] | None:
        """The scope's centre and its mark (the highest rowid still to band; 0: none), or None before it has one."""
        import numpy as np

        centre = self._centres.get(key)
        if centre is not None and key in self._whole:  # a scope's mark never rises again once at 0
            return centre, 0
        row = conn.execute(_STATE, (key,)).fetchone()
        if row is None:
            return None
        if int(row[0]) == 0:
            self._whole.add(key)
        if centre is None:
            blob = conn.execute("SELECT centre FROM note_band_centres WHERE scope = ?", (key,)).fetchone()[0]
            centre = self._centres[key] = np.frombuffer(bytes(blob), dtype=np.float64).copy()
        return centre, int(row[0])

    def band_candidates(self, scope: Scope, content: str) -> list[int] | None:
        """Given a new note's content, return the rowids sharing a probed band with it (any kind or status:
        the exact check decides), or None while the scope has no bands for all its rows (the fold then
        searches without them)."""
        return self.band_candidates_many(scope, [content])[0]

    def band_candidates_many(self, scope: Scope, contents: Sequence[str]) -> list[list[int] | None]:
        """:meth:`band_candidates` of each content, the lookups of all of them in as few statements as
        the engine's parameters allow (a many-note remember's); None for a content the bands cannot
        answer (no word, a crowded key, a scope not wholly banded)."""
        out: list[list[int] | None] = [None] * len(contents)
        asked = [at for at, content in enumerate(contents) if has_words(content)]
        if not self.fold_bands or not asked:  # a text of no word folds only into the same text
            return out
        key = fold_bands.scope_code(scope)
        with self.read() as conn:
            state = self._band_state(conn, key)
            if state is None or state[1] > 0:
                return out
            wanted = fold_bands.probes_many(fold_bands.bags([contents[at] for at in asked]), state[0])
            held = _held_codes(conn, self.engine, key, sorted({code for probes in wanted for code in probes}),
                               limit=MAX_CANDIDATES * len(asked))  # fmt: skip
            for at, probes in zip(asked, wanted, strict=True):
                if held is None:  # a crowded key among them: each content's own lookup, cut at the cap
                    found = _held_codes(conn, self.engine, key, probes, limit=MAX_CANDIDATES * len(probes))
                    rowids = None if found is None else found.rowids(probes)
                else:
                    rowids = held.rowids(probes)
                if rowids is not None and len(rowids) <= MAX_CANDIDATES:  # more: the search without bands
                    out[at] = rowids
        return out

    def _band_rows(self, conn: Connection, scope: Scope, rows: Sequence[tuple[int, str]]) -> None:
        """Band new rows ``(rowid, content)`` of the scope, in the write's transaction (see the module)."""
        key = fold_bands.scope_code(scope)
        state = self._band_state(conn, key)
        if state is None:  # the rows this write brings are banded at once, those held before it marked
            state = self._settle_centre(conn, scope, key, below=min((rowid for rowid, _ in rows), default=None))
            if state is None:
                return
        centre, upto = state
        self._add_bands(conn, key, [(rowid, text) for rowid, text in rows if rowid > upto], centre)
        if upto > 0:
            self._backfill(conn, scope, key, centre, upto)

    def _unband_row(self, conn: Connection, scope: Scope, rowid: int, content: str) -> None:
        """Delete the bands of a row about to be rewritten or deleted (``content``: as it was banded)."""
        key = fold_bands.scope_code(scope)
        state = self._band_state(conn, key)
        if state is not None:
            _delete_bands(conn, key, *state, [(rowid, content)])

    def _add_bands(self, conn: Connection, key: int, rows: Sequence[tuple[int, str]],
                   centre: npt.NDArray[np.float64]) -> None:  # fmt: skip
        if not rows:
            return
        conn.executemany(
            "INSERT INTO note_bands (scope, code, note_rowid) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            _band_rows_of(key, rows, centre),
        )
        bags = [(rowid, blob) for rowid, blob in ((rowid, fold_bands.bag_blob(text)) for rowid, text in rows) if blob]
        conn.executemany(_PUT_BAG, bags)

    def bags_by_rowid(self, rowids: Sequence[int]) -> dict[int, bytes]:
        """The kept bags of words (:func:`~.fold_bands.bag_blob`) of those rowids that have one."""
        out: dict[int, bytes] = {}
        with self.read() as conn:
            for start in range(0, len(rowids), _ROWIDS_A_STATEMENT):
                chunk = rowids[start : start + _ROWIDS_A_STATEMENT]
                among, params = self.engine.among("note_rowid", chunk)
                sql = f"SELECT note_rowid, bag FROM note_bags WHERE {among}"
                out.update((int(rowid), bytes(bag)) for rowid, bag in conn.execute(sql, params).fetchall())
        return out

    def _settle_centre(self, conn: Connection, scope: Scope, key: int, *,
                       below: int | None = None) -> tuple[npt.NDArray[np.float64], int] | None:  # fmt: skip
        """Give a scope of ``CENTRE_ROWS`` notes or more its centre, every row it holds (below rowid ``below``:
        the rows the write in hand brings are its own to band) marked still to band; return its state, or
        None while it holds fewer."""
        wanted = int(fold_bands.CENTRE_ROWS)
        held = conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM notes WHERE {_SCOPE} LIMIT {wanted}) AS held",
                            _scope_key(scope)).fetchone()  # fmt: skip
        if int(held[0]) < wanted:  # counted from the scope's index alone: a small scope's write reads no text
            return None
        # by rowid, the scope's condition hinted off its index (else SQLite reads and sorts the whole scope)
        first = conn.execute(f"SELECT rowid, content FROM notes WHERE TRUE {self.scope_rows()} ORDER BY rowid "
                             f"LIMIT {wanted}", _scope_key(scope)).fetchall()  # fmt: skip
        centre = fold_bands.centre_of(fold_bands.bags([str(text) for _, text in first]))
        under = "" if below is None else f"AND rowid < {int(below)} "
        top = conn.execute(f"SELECT rowid FROM notes WHERE TRUE {under}{self.scope_rows()} ORDER BY rowid DESC "
                           "LIMIT 1", _scope_key(scope)).fetchone()  # fmt: skip
        conn.execute(
            "INSERT INTO note_band_centres (scope, centre, unbanded_upto) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (key, centre.tobytes(), 0 if top is None else int(top[0])),
        )
        return self._band_state(conn, key)  # another writer's, had it been first

    def _backfill(self, conn: Connection, scope: Scope, key: int, centre: npt.NDArray[np.float64], upto: int) -> int:
        """Band up to ``BACKFILL_ROWS`` of the scope's rows at or under the mark, newest first, and lower it
        (once a transaction, so a batch's write lock is not held for the whole catch-up); return how many."""
        tx = self.uncommitted_tx()
        if tx is not None and tx == self._backfilled_tx:
            return 0
        self._backfilled_tx = tx
        rows = conn.execute(  # by rowid, the scope's condition hinted off its index (else SQLite sorts the scope)
            f"SELECT rowid, content FROM notes WHERE rowid <= ? {self.scope_rows()} ORDER BY rowid DESC "
            f"LIMIT {BACKFILL_ROWS}",
            (upto, *_scope_key(scope)),
        ).fetchall()
        self._add_bands(conn, key, [(int(rowid), str(text)) for rowid, text in rows], centre)
        mark = int(rows[-1][0]) - 1 if len(rows) == BACKFILL_ROWS else 0
        conn.execute("UPDATE note_band_centres SET unbanded_upto = ? WHERE scope = ? AND unbanded_upto > ?",
                     (mark, key, mark))  # fmt: skip
        return len(rows)

    def band_backlog(self, scope: Scope) -> int | None:
        """How many of the scope's rows are still to band (None: the scope has no centre yet)."""
        key = fold_bands.scope_code(scope)
        with self.read() as conn:
            state = self._band_state(conn, key)
            if state is None:
                return None
            if state[1] == 0:
                return 0
            row = conn.execute(f"SELECT COUNT(*) FROM notes WHERE {_SCOPE} AND rowid <= ?",
                               (*_scope_key(scope), state[1])).fetchone()  # fmt: skip
            return int(row[0])

    def catch_up_bands(self, scope: Scope) -> int:
        """Band every row of the scope still to band now, ``BACKFILL_ROWS`` a transaction (what its writes
        would do one chunk at a time); return how many rows were banded. A scope without a centre yet
        gets one when it holds ``CENTRE_ROWS`` notes."""
        key = fold_bands.scope_code(scope)
        done = 0
        while True:
            with self.write(scope) as conn:
                state = self._band_state(conn, key) or self._settle_centre(conn, scope, key)
                if state is None or state[1] == 0:
                    return done
                banded = self._backfill(conn, scope, key, *state)
            if not banded:  # called inside a transaction that has had its chunk: the rest is for the next ones
                return done
            done += banded

    def _old_content(self, conn: Connection, scope: Scope, note_id: str) -> tuple[int, str] | None:
        row = conn.execute(f"SELECT rowid, content FROM notes WHERE {_SCOPE} AND id = ?",
                           (*_scope_key(scope), note_id)).fetchone()  # fmt: skip
        return None if row is None else (int(row[0]), str(row[1]))


def unband_rows(conn: Connection, scope: Scope, rows: Sequence[tuple[int, str]]) -> None:
    """Delete the bands of rows ``(rowid, content)`` of the scope about to be deleted by SQL of its own
    (``afi gc``), in that write's transaction."""
    import numpy as np

    key = fold_bands.scope_code(scope)
    found = conn.execute("SELECT centre, unbanded_upto FROM note_band_centres WHERE scope = ?", (key,)).fetchone()
    if found is not None and rows:
        _delete_bands(conn, key, np.frombuffer(bytes(found[0]), dtype=np.float64), int(found[1]), rows)


def _delete_bands(conn: Connection, key: int, centre: npt.NDArray[np.float64], upto: int,
                  rows: Sequence[tuple[int, str]]) -> None:  # fmt: skip
    banded = [(rowid, text) for rowid, text in rows if rowid > upto]  # the others were never banded
    if not banded:
        return
    conn.executemany(
        "DELETE FROM note_bands WHERE scope = ? AND code = ? AND note_rowid = ?", _band_rows_of(key, banded, centre)
    )
    conn.executemany("DELETE FROM note_bags WHERE note_rowid = ?", [(rowid,) for rowid, _ in banded])


def _band_rows_of(key: int, rows: Sequence[tuple[int, str]],
                  centre: npt.NDArray[np.float64]) -> list[tuple[int, int, int]]:  # fmt: skip
    """The ``(scope, code, note_rowid)`` band rows of rows ``(rowid, content)`` of the scope ``key``."""
    codes = fold_bands.codes(fold_bands.bags([text for _, text in rows]), centre)
    return [(key, int(code), rowid) for (rowid, _), row in zip(rows, codes, strict=True) for code in row]


class _HeldCodes:
    """Band rows ``(code, note_rowid)`` read for many probes, sorted by code, each probe's rows a slice."""

    def __init__(self, rows: list[tuple[int, int]]) -> None:
        import numpy as np

        pairs = np.array(rows, dtype=np.int64).reshape(-1, 2)
        order = np.argsort(pairs[:, 0], kind="stable")
        self.codes = pairs[order, 0]
        self.rowids_by_code = pairs[order, 1]

    def rowids(self, probes: Sequence[int]) -> list[int]:
        """The distinct rowids the probes name, in ascending order."""
        import numpy as np

        wanted = np.asarray(probes, dtype=np.int64)
        starts = np.searchsorted(self.codes, wanted, side="left")
        ends = np.searchsorted(self.codes, wanted, side="right")
        parts = [self.rowids_by_code[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True) if b > a]
        if not parts:
            return []
        out: list[int] = np.unique(np.concatenate(parts)).tolist()
        return out


def _held_codes(conn: Connection, engine: Engine, key: int, codes: Sequence[int], *, limit: int) -> _HeldCodes | None:
    """The band rows of the scope ``key`` with those codes, or None past ``limit`` rows in all."""
    rows: list[tuple[int, int]] = []
    for start in range(0, len(codes), _CODES_A_STATEMENT):
        among, params = engine.among("code", codes[start : start + _CODES_A_STATEMENT])
        sql = f"SELECT code, note_rowid FROM note_bands WHERE scope = ? AND {among} LIMIT {limit - len(rows) + 1}"
        rows.extend(conn.execute(sql, (key, *params)).fetchall())
        if len(rows) > limit:
            return None
    return _HeldCodes(rows)
