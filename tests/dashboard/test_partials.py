"""One URL, two answers: the whole page, or its partial for an htmx swap, and caches told which is which."""

import pytest
from django.urls import reverse

from tests.factories import SITE, make_finished_audit

pytestmark = pytest.mark.django_db

SWAP = {"HTTP_HX_REQUEST": "true"}
# htmx asks for a page it no longer has in its history cache with both headers.
RESTORE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}

SCREENS = [("audit-detail", ""), ("issue-list", "?severity=critical"), ("page-list", "?status=4xx"),
           ("page-list", "?change=added"), ("broken-list", "?scope=internal"),
           ("broken-sources", f"?target={SITE}/gone"), ("audit-compare", "?show=fixed")]


@pytest.fixture
def audits(owner):
    older = make_finished_audit(owner)
    newer = make_finished_audit(owner)
    newer.change_counts = {"issues": {}, "pages": {}}
    newer.save(update_fields=["change_counts"])
    return older, newer


def url_of(name, query, audits):
    older, newer = audits
    return reverse(name, args=[newer.pk, older.pk] if name == "audit-compare" else [newer.pk]) + query


@pytest.mark.parametrize("name, query", SCREENS)
def test_an_htmx_swap_gets_the_partial(owner_client, audits, name, query):
    response = owner_client.get(url_of(name, query, audits), **SWAP)
    assert response.status_code == 200 and b"<html" not in response.content


@pytest.mark.parametrize("name, query", SCREENS)
def test_htmx_restoring_history_gets_the_whole_page(owner_client, audits, name, query):
    response = owner_client.get(url_of(name, query, audits), **RESTORE)
    assert response.status_code == 200 and b"<html" in response.content


@pytest.mark.parametrize("name, query", SCREENS)
@pytest.mark.parametrize("headers", [{}, SWAP])
def test_both_answers_vary_on_the_htmx_headers(owner_client, audits, name, query, headers):
    vary = owner_client.get(url_of(name, query, audits), **headers)["Vary"]
    assert "HX-Request" in vary and "HX-History-Restore-Request" in vary
