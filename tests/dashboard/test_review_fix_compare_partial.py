"""The compare view's tab and page clicks (htmx swaps of the table) skip the live counts only the whole page shows."""

import pytest
from django.urls import reverse

from audits import diff
from tests.factories import SITE, make_finished_audit, make_issue

pytestmark = pytest.mark.django_db

SWAP = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def live_counts_calls(monkeypatch):
    """Each call of diff.live_counts, recorded, and still answered."""
    calls = []
    real = diff.live_counts

    def recording(audit, base):
        calls.append((audit.pk, base.pk))
        return real(audit, base)

    monkeypatch.setattr(diff, "live_counts", recording)
    return calls


@pytest.fixture
def pair(owner):
    """Two audits compared live (the newer stored no diff against the older), one issue new."""
    older = make_finished_audit(owner)
    newer = make_finished_audit(owner)
    make_issue(newer, "h1_missing", f"{SITE}/blog/")
    return older, newer


@pytest.mark.parametrize("query", ["?show=new", "?show=persisting", "?show=fixed", "?show=added", "?page=2"])
def test_a_tab_or_page_click_does_not_compute_the_live_counts(owner_client, pair, live_counts_calls, query):
    older, newer = pair
    response = owner_client.get(reverse("audit-compare", args=[newer.pk, older.pk]) + query, **SWAP)
    assert response.status_code == 200 and b"<html" not in response.content
    assert b'id="compare-table"' in response.content
    assert live_counts_calls == []


def test_the_tab_click_still_lists_the_rows_of_its_tab(owner_client, pair, live_counts_calls):
    older, newer = pair
    body = owner_client.get(reverse("audit-compare", args=[newer.pk, older.pk]) + "?show=new", **SWAP).content.decode()
    assert 'data-code="h1_missing"' in body and body.count('class="issue"') == 1
    assert live_counts_calls == []


def test_the_whole_page_still_computes_and_shows_the_counts(owner_client, pair, live_counts_calls):
    older, newer = pair
    response = owner_client.get(reverse("audit-compare", args=[newer.pk, older.pk]) + "?show=new")
    assert response.status_code == 200 and b"<html" in response.content
    assert live_counts_calls == [(newer.pk, older.pk)]
    assert response.context["totals"] == {"new": 1, "persisting": 5, "fixed": 0, "unknown": 0}
    body = response.content.decode()
    new_row = body[body.index('id="count-new"'):body.index("</tr>", body.index('id="count-new"'))]
    persisting_row = body[body.index('id="count-persisting"'):body.index("</tr>", body.index('id="count-persisting"'))]
    assert new_row.endswith("<td>1</td>") and persisting_row.endswith("<td>5</td>")


def test_htmx_restoring_history_gets_the_whole_page_with_its_counts(owner_client, pair, live_counts_calls):
    older, newer = pair
    response = owner_client.get(reverse("audit-compare", args=[newer.pk, older.pk]) + "?show=new",
                                HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert b'id="compare-counts"' in response.content
    assert live_counts_calls == [(newer.pk, older.pk)]
