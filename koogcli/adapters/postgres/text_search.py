"""Memory's full-text search language on PostgreSQL.

Records are indexed (`tsvector`) in the configured text search language over their text
with diacritics folded here, so no `unaccent` extension is needed. Query words are
stemmed by a Snowball dictionary without the language's stop-word list: "own" is an
English stop word, yet it is how "owned" is indexed.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from koogcli.adapters.sql.memory_queries import term_forms

_FIND_DICTIONARY = (
    "SELECT 1 FROM pg_ts_dict d JOIN pg_namespace n ON n.oid = d.dictnamespace "
    "WHERE d.dictname = %s AND n.nspname = current_schema()"
)


def fold(text: str) -> str:
    """Lower-cased, without diacritics: "Déploiement" and "deploiement" are one word."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def use_language(conn: Any, language: str) -> None:
    """Records are indexed in one language; a new setting re-indexes them once."""
    with conn.transaction():
        conn.execute("LOCK TABLE memory_settings IN EXCLUSIVE MODE")
        row = conn.execute("SELECT value FROM memory_settings WHERE key = 'language'").fetchone()
        if row is not None and row[0] == language:
            return
        found = conn.execute("SELECT seq, content FROM memory_records").fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE memory_records SET search = to_tsvector(%s::regconfig, %s) WHERE seq = %s",
                [(language, fold(content), seq) for seq, content in found],
            )
        conn.execute(
            "INSERT INTO memory_settings VALUES ('language', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [language],
        )


def stem_dictionary(conn: Any, language: str) -> str | None:
    """The stop-word-free stemming dictionary of the language, created once per schema;
    None for a language without a Snowball stemmer (`simple`, a custom configuration):
    then the configuration's own query parsing is used."""
    import psycopg

    name = f"koog_stem_{language}"[:63]
    if conn.execute(_FIND_DICTIONARY, [name]).fetchone():
        return name
    try:
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
                [":" + name],
            )
            if conn.execute(_FIND_DICTIONARY, [name]).fetchone() is None:
                conn.execute(
                    f"CREATE TEXT SEARCH DICTIONARY {name} "
                    f"(TEMPLATE = snowball, Language = {language})"
                )
    except psycopg.Error:
        return None
    return name


def forms(term: str, language: str, stemmer: str | None) -> tuple[str, list[str]]:
    """A tsquery (SQL and arguments) matching one query word in any of its forms
    (memory_queries.term_forms)."""
    words = term_forms(term)
    if stemmer is None:
        sql = " || ".join(["plainto_tsquery(%s::regconfig, %s)"] * len(words))
        return sql, [x for word in words for x in (language, word)]
    one = (
        "coalesce((SELECT string_agg(quote_literal(l), ' | ')::tsquery "
        "FROM unnest(ts_lexize(%s::regdictionary, %s)) l), ''::tsquery)"
    )
    return " || ".join([one] * len(words)), [x for word in words for x in (stemmer, word)]
