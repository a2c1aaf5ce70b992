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
    """SQLite's own allocation counter, from the shared library the sqlite3 module
    uses; None where that library cannot be reached (a Python that links SQLite
    statically), in which case tests/config/test_env.py still checks the setting."""
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    version = sqlite3.sqlite_version_info
    if lib.sqlite3_libversion_number() != version[0] * 1_000_000 + version[1] * 1_000 + version[2]:
        return None
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib.sqlite3_memory_used


MEMORY_USED = _sqlite_memory_used()


@pytest.mark.skipif(connection.vendor != "sqlite" or MEMORY_USED is None,
                    reason="measures SQLite's own memory: the SQLite run, with a shared libsqlite3")
def test_many_lengths_of_in_list_do_not_pile_up_prepared_statements():
    memory_used = MEMORY_USED
    list(FrontierURL.objects.filter(url_hash__in=["x"]))
    before = memory_used()
    for length in range(500, 700):  # 200 distinct statements, as 200 sub-batches would make
        list(FrontierURL.objects.filter(url_hash__in=[f"{n:032x}" for n in range(length)]))
    grown = memory_used() - before
    # A 600-parameter SELECT is ~130 KB inside SQLite: Python's default cache keeps
    # 128 of them (~17 MB, measured), the configured one 32 (~4.3 MB).
    assert grown < 6_000_000, grown
