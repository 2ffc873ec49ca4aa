"""A PostgreSQL note keeps what it cannot derive: its rendering and its lexemes are SQL functions.

A note's Markdown (what ``cat`` shows and grep reads) is its front matter followed by its content;
keeping the whole rendering stored the content twice. From migration step 11 the ``notes`` table keeps
the front matter alone (``front``) and :data:`RENDERED_SQL` puts the two together again, byte for byte
what the fabric's ``render_note`` writes. The trigram index grep asks is built on that expression.

Likewise the lexical ``tsvector`` is no longer a stored column: the GIN index is built on
:data:`LEXEMES_SQL`, and the only thing BM25 needs per note besides the index, how many lexemes the
note holds, is the generated integer column ``lexemes``.

Both functions are ``IMMUTABLE`` (``to_tsvector`` with an explicit configuration is), so PostgreSQL
indexes them, and a query that spells the same expression uses those indexes. The SQLite store is
unchanged: its FTS5 tables keep their own copies, and it still has a ``rendered`` column.
"""

from __future__ import annotations

from typing import Any

from ..errors import Unsupported

__all__ = ["LEXEMES_SQL", "RENDERED_SQL", "derive_notes"]

RENDERED_SQL = "afi_rendered(front, content)"
LEXEMES_SQL = "afi_lexemes(content, tags, keywords, context)"

# a rendering ends with exactly one newline after content that has none (render_note's rule)
_FUNCTIONS = r"""
CREATE FUNCTION afi_rendered(front text, content text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT front || content || CASE WHEN right(content, 1) = E'\n' THEN '' ELSE E'\n' END $$;
CREATE FUNCTION afi_lexemes(content text, tags text, keywords text, context text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT strip(to_tsvector('english'::regconfig, coalesce(content, '') || ' ' || coalesce(tags, '')
        || ' ' || coalesce(keywords, '') || ' ' || coalesce(context, ''))) $$;
"""

_SPLIT = r"""
ALTER TABLE notes ADD COLUMN front text COLLATE "C";
UPDATE notes SET front = left(rendered, length(rendered) - length(content)
    - CASE WHEN right(content, 1) = E'\n' THEN 0 ELSE 1 END);
"""

_UNDERIVABLE = f"SELECT id FROM notes WHERE {RENDERED_SQL} IS DISTINCT FROM rendered LIMIT 3"

# Both GIN indexes take new entries into a pending list of at most 64 kB, as before (step 9, "compact notes", says why).
# notes_kind_name goes: every lookup by name asks the file-name index (fabric.rows.NAMED), now whole
# rather than partial, because PostgreSQL keeps statistics of an index's expression only for an index
# without a WHERE: without them it guessed 1 note in 200 for a name, and planned a join by names
# (the names of a page of search hits) as a scan of every note, 44 ms at 100k notes instead of 0.6.
_DERIVED = f"""
ALTER TABLE notes ALTER COLUMN front SET NOT NULL;
DROP INDEX IF EXISTS notes_kind_name;
DROP INDEX notes_file_name;
CREATE INDEX notes_file_name ON notes (tenant_id, resource_id, thread_id, kind, (name || '.md'));
DROP INDEX notes_rendered_folded_trgm;
DROP INDEX notes_lexical;
ALTER TABLE notes DROP COLUMN rendered, DROP COLUMN lexical;
ALTER TABLE notes ADD COLUMN lexemes integer GENERATED ALWAYS AS (length({LEXEMES_SQL})) STORED;
-- grep reads the rendering with the Kelvin sign and the long s spelled k and s (afi.storage.pg_trigram.folded)
CREATE INDEX notes_rendered_folded_trgm ON notes
    USING gin (translate({RENDERED_SQL}, U&'\\212A\\017F', 'ks') gin_trgm_ops)
    WITH (fastupdate = on, gin_pending_list_limit = 64);
CREATE INDEX notes_lexical ON notes USING gin ({LEXEMES_SQL}) WITH (gin_pending_list_limit = 64);
"""


def derive_notes(conn: Any) -> None:
    """Migration step 11: keep each note's front matter instead of its rendering, drop the stored
    ``tsvector`` and the (kind, name) index (the whole file-name index serves names). Refuses,
    changing nothing, when a stored rendering is not its front matter and content put together (a
    store written by hand, not by afi-memory)."""
    conn.execute(_FUNCTIONS.encode())
    conn.execute(_SPLIT.encode())
    odd = [str(row[0]) for row in conn.execute(_UNDERIVABLE).fetchall()]
    if odd:
        raise Unsupported(
            f"notes {', '.join(odd)} have a stored rendering that is not their front matter followed by their "
            "content; migration step 11 keeps only the front matter and would change what they show, so the "
            "store stays at step 10 (rewrite those notes through afi-memory, then migrate again)"
        )
    conn.execute(_DERIVED.encode())
    conn.execute("ANALYZE notes")  # BM25 reads the common lexemes' counts from the index's statistics
