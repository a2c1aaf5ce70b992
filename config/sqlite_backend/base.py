"""Django's SQLite backend, with two per-statement and per-value costs of bulk writes taken out.

The crawl writes ~100 rows a page through multi-row INSERTs whose values are
``?`` placeholders (``audits/bulk.py``). Measured with callgrind over a
1,000-page audit (861 statements, 4.3 MB of SQL, 1.26 million values), two
things in the driver's path cost the database thread about a tenth of its
instructions:

* Django's cursor rewrites ``%s`` to ``?`` with a regular expression over
  every statement that has parameters (``(?<!%)%s``: tried at every
  character, ~190 instructions a character: 816 million in all). A
  statement with no ``%`` in it comes out of that rewrite unchanged, so it
  is passed on as it is.
* ``sqlite3`` binds int, float, str, bytes and None directly; any other type
  is "adapted" first, and with no adapter registered the lookup ends in an
  AttributeError whose message is formatted and thrown away (~2,000
  instructions). The rows carry 218,000 booleans (a link edge has two). A
  registered bool -> int adapter stores exactly what sqlite3 stored for a
  bool before, 1 or 0, found with one dict lookup.
"""

from __future__ import annotations

import sqlite3

from django.db.backends.sqlite3 import base

sqlite3.register_adapter(bool, int)


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None and "%" not in query:
            return query  # what the "format" -> "qmark" rewrite would return
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)
