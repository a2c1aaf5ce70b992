"""``field__in_array`` finds exactly what ``__in`` finds, on either database, and
PostgreSQL gets the values as one array parameter."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits.lookups import pg_array
from audits.models import FrontierURL
from tests.dashboard.factories import make_audit

pytestmark = pytest.mark.django_db

# Strings an array literal must keep as they are: separators, quotes, escapes,
# braces, the word NULL, spaces and non-ASCII.
AWKWARD = ["a,b", 'say "hi"', "back\\slash", "{braces}", "NULL", "null", " spaced ", "é☃", "", "plain"]


@pytest.fixture
def rows(owner):
    audit = make_audit(owner)
    FrontierURL.objects.bulk_create(
        FrontierURL(audit=audit, url_hash=value, url=f"https://example.com/{n}", template_key=value[:32])
        for n, value in enumerate(AWKWARD)
    )
    return FrontierURL.objects.filter(audit=audit)


def same(rows, field, values):
    """The ids matched by __in_array and by __in, sorted."""
    found = sorted(rows.filter(**{f"{field}__in_array": values}).values_list("id", flat=True))
    expected = sorted(rows.filter(**{f"{field}__in": values}).values_list("id", flat=True))
    assert found == expected
    return found


def test_awkward_strings_match_themselves_and_nothing_else(rows):
    for value in AWKWARD:
        assert len(same(rows, "url_hash", [value])) == 1, value
    assert len(same(rows, "url_hash", AWKWARD)) == len(AWKWARD)
    assert same(rows, "url_hash", ["a", "b", "say", "hi", "braces", "{NULL}", "Null"]) == []


def test_ids_duplicates_none_and_empty_lists_behave_like_in(rows):
    ids = sorted(rows.values_list("id", flat=True))
    assert same(rows, "id", ids[:3] + ids[:3] + [None]) == ids[:3]
    assert same(rows, "id", [max(ids) + 1000]) == []
    assert same(rows, "id", []) == []
    assert same(rows, "id", [None]) == []
    assert same(rows, "url_hash", set(AWKWARD[:2])) == ids[:2]


def test_a_generator_of_values_serves_a_queryset_evaluated_twice(rows):
    ids = sorted(rows.values_list("id", flat=True))
    chosen = rows.filter(id__in_array=(pk for pk in ids[:2]))
    assert chosen.count() == 2
    assert sorted(chosen.values_list("id", flat=True)) == ids[:2]


def test_a_subquery_goes_through_in(rows):
    ids = sorted(rows.values_list("id", flat=True))
    inner = FrontierURL.objects.filter(id__in=ids[:3]).values("id")
    assert sorted(rows.filter(id__in_array=inner).values_list("id", flat=True)) == ids[:3]


def test_values_that_are_not_plain_for_the_column_go_through_in(rows):
    ids = sorted(rows.values_list("id", flat=True))
    # Django's __in turns these into ints; so must __in_array.
    assert same(rows, "id", [str(ids[0]), str(ids[1])]) == ids[:2]


def test_an_update_through_the_lookup_changes_exactly_the_rows_named(rows):
    ids = sorted(rows.values_list("id", flat=True))
    changed = rows.filter(id__in_array=ids[2:5], state=FrontierURL.State.PENDING).update(
        state=FrontierURL.State.LEASED, chunk=7)
    assert changed == 3
    assert sorted(rows.filter(chunk=7).values_list("id", flat=True)) == ids[2:5]


def test_the_values_go_as_one_array_to_postgresql_and_as_an_in_list_elsewhere(rows):
    hashes = [f"{n:032x}" for n in range(500)]
    with CaptureQueriesContext(connection) as queries:
        list(rows.filter(url_hash__in_array=hashes).values_list("id"))
    sql = queries.captured_queries[-1]["sql"]
    if connection.vendor == "postgresql":
        assert "= ANY(" in sql and "::text[]" in sql and " IN (" not in sql
    else:
        assert " IN (" in sql and "ANY(" not in sql
        assert all(digest in sql for digest in hashes)


def test_pg_array_quotes_every_string_and_writes_ints_bare():
    assert pg_array([1, 22, 333]) == ("{1,22,333}", "bigint[]")
    assert pg_array(['a"b', "c\\d", "x,y"]) == ('{"a\\"b","c\\\\d","x,y"}', "text[]")
    with pytest.raises(TypeError):
        pg_array([1, "2"])
