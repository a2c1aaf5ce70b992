"""SQLite's own memory stays bounded when the crawl's IN (...) lists keep changing length.

Every distinct list length is a distinct prepared statement; with Python's default
cache of 128 statements per connection they pile up inside SQLite (tens of MB on a
large audit). Measured through sqlite3_memory_used, from the SQLite library this
Python's sqlite3 module is linked against.
"""

import ctypes
import ctypes.util
import sqlite3

import pytest
from django.db import connection

from audits.models import FrontierURL

pytestmark = pytest.mark.django_db


def _sqlite_memory_used():
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        pytest.skip("no shared libsqlite3 to ask (this Python links SQLite statically)")
    lib = ctypes.CDLL(name)
    if lib.sqlite3_libversion_number() != sqlite3.sqlite_version_info[0] * 1_000_000 + \
            sqlite3.sqlite_version_info[1] * 1_000 + sqlite3.sqlite_version_info[2]:
        pytest.skip("the shared libsqlite3 is not the one the sqlite3 module uses")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib.sqlite3_memory_used


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's statement cache")
def test_many_lengths_of_in_list_do_not_pile_up_prepared_statements():
    memory_used = _sqlite_memory_used()
    list(FrontierURL.objects.filter(url_hash__in=["x"]))
    before = memory_used()
    for length in range(500, 700):  # 200 distinct statements, as 200 sub-batches would make
        list(FrontierURL.objects.filter(url_hash__in=[f"{n:032x}" for n in range(length)]))
    grown = memory_used() - before
    # A 600-parameter SELECT is ~130 KB inside SQLite: Python's default cache keeps
    # 128 of them (~17 MB, measured), the configured one 32 (~4.3 MB).
    assert grown < 6_000_000, grown
