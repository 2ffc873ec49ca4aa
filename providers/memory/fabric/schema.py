"""The store's schema: numbered migrations, run in order at open (see :mod:`.store`)."""

from __future__ import annotations

import sqlite3

__all__ = ["MIGRATIONS", "split_sql"]

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        CREATE TABLE notes (
            rowid INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
            ingested_at TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT, token_count INTEGER NOT NULL,
            t_ref TEXT, valid_from TEXT, valid_to TEXT, supersedes TEXT, links TEXT, tags TEXT, keywords TEXT,
            context TEXT, importance REAL, source_entry_ids TEXT, path TEXT, block TEXT, promoted_from TEXT,
            consent TEXT, status TEXT NOT NULL DEFAULT 'active', forgotten_at TEXT,
            seq INTEGER NOT NULL, rendered TEXT NOT NULL, embedding BLOB,
            UNIQUE (tenant_id, resource_id, thread_id, id)
        );
        CREATE INDEX notes_kind_name ON notes (tenant_id, resource_id, thread_id, kind, name);
        CREATE INDEX notes_path ON notes (tenant_id, resource_id, thread_id, path) WHERE path IS NOT NULL;
        CREATE VIRTUAL TABLE notes_trigram USING fts5(
            rendered, content='notes', content_rowid='rowid', tokenize='trigram');
        CREATE VIRTUAL TABLE notes_lexical USING fts5(
            content, tags, keywords, context, content='notes', content_rowid='rowid',
            tokenize='porter unicode61');
        CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
            INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
            INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
                VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
        END;
        CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN
            INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
            INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
                VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
        END;
        CREATE TRIGGER notes_au_trigram AFTER UPDATE OF rendered ON notes BEGIN
            INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
            INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
        END;
        CREATE TRIGGER notes_au_lexical AFTER UPDATE OF content, tags, keywords, context ON notes BEGIN
            INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
                VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
            INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
                VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
        END;
        CREATE TABLE source_lineage (
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            entry_id TEXT NOT NULL, status TEXT NOT NULL, changed_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, resource_id, thread_id, entry_id)
        );
        CREATE TABLE working (
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            value TEXT NOT NULL, version INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, resource_id, thread_id)
        );
        CREATE TABLE note_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            note_id TEXT NOT NULL, op TEXT NOT NULL
        );
        CREATE INDEX note_changes_scope ON note_changes (tenant_id, resource_id, thread_id, seq);
        """,
    ),
)


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    statements, current = [], ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
