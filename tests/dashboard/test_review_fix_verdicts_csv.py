"""A validation's verdicts: every one as a CSV download, linked from the checklist the page shows the first of."""

import csv
import io

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse

import audits.views
from audits import diff, exports
from audits.models import Audit, GoneIssue, Issue
from tests.factories import SITE, make_finished_audit, make_issue

pytestmark = pytest.mark.django_db

BOM = b"\xef\xbb\xbf"
FORMULA = '=HYPERLINK("http://x","click")'


@pytest.fixture
def check(owner) -> Audit:
    """A finished validation of a finished audit: 3 issues still there, 1 fixed, 2 unknown (one formula-like)."""
    done = make_finished_audit(owner)
    make_issue(done, "title_length", f"{SITE}/blog/", message=FORMULA)
    check = make_finished_audit(owner, mode=Audit.Mode.VALIDATE, source=done, baseline=done)
    Issue.objects.filter(audit=check, code__in=["meta_description_missing", "title_length"]).delete()
    fixed = Issue.objects.get(audit=done, code="meta_description_missing")
    GoneIssue.objects.create(audit=check, change="fixed", key=fixed.key, url=fixed.url, code=fixed.code,
                             severity=fixed.severity, message=fixed.message)
    diff.keep_rechecked(check, done)  # as finalize does, from the rows above
    return check


def download(client, audit) -> list[dict]:
    response = client.get(reverse("export-verdicts", args=[audit.pk]))
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="audit-{audit.pk}-verdicts.csv"'
    assert response["Cache-Control"] == "private, no-store"
    body = b"".join(response.streaming_content)
    assert body.startswith(BOM)
    rows = list(csv.reader(io.StringIO(body[len(BOM):].decode("utf-8"), newline="")))
    assert rows[0] == exports.VERDICT_COLUMNS
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def test_the_csv_has_every_verdict_even_past_the_checklist_the_page_shows(owner_client, check, monkeypatch):
    monkeypatch.setattr(audits.views, "CHECKLIST_ROWS", 2)
    assert owner_client.get(check.get_absolute_url()).content.decode().count('<tr class="verdict-') == 2
    rows = download(owner_client, check)
    assert len(rows) == 6
    assert [row["result"] for row in rows] == ["still"] * 3 + ["unknown"] * 2 + ["fixed"]
    assert {(row["result"], row["code"], row["url"]) for row in rows} >= {
        ("fixed", "meta_description_missing", f"{SITE}/"),
        ("unknown", "title_length", f"{SITE}/about"),
        ("still", "http_4xx", f"{SITE}/gone"),
    }
    link = next(row for row in rows if row["code"] == "broken_link_internal")
    assert (link["severity"], link["target_url"], link["title"]) == ("critical", f"{SITE}/gone", "Broken internal link")
    unknown = next(row for row in rows if (row["code"], row["url"]) == ("title_length", f"{SITE}/about"))
    assert unknown["why"] == "It was not read as an HTML page this time (served as another type, or cut at the size cap)."
    assert all(row["why"] == "" for row in rows if row["result"] != "unknown")


def test_a_formula_like_message_is_neutralised_in_the_csv(owner_client, check):
    row = next(row for row in download(owner_client, check) if row["url"] == f"{SITE}/blog/")
    assert row["message"] == "'" + FORMULA


def test_a_stranger_gets_404_for_the_verdicts_csv(stranger_client, check):
    assert stranger_client.get(reverse("export-verdicts", args=[check.pk])).status_code == 404


def test_an_audit_that_is_not_a_validation_has_no_verdicts_to_download(owner_client, owner):
    assert download(owner_client, make_finished_audit(owner)) == []


def test_the_checklist_links_the_download_however_few_verdicts_it_has(owner_client, check):
    body = owner_client.get(check.get_absolute_url()).content.decode()
    assert f'href="{reverse("export-verdicts", args=[check.pk])}" id="csv-verdicts"' in body
    assert 'id="checklist-more"' not in body


@pytest.mark.parametrize("cap", [6, 7])
def test_no_note_when_the_checklist_shows_every_verdict_even_exactly_the_cap(owner_client, check, monkeypatch, cap):
    monkeypatch.setattr(audits.views, "CHECKLIST_ROWS", cap)
    body = owner_client.get(check.get_absolute_url()).content.decode()
    assert body.count('<tr class="verdict-') == 6
    assert 'id="checklist-more"' not in body and "The first" not in body


def test_the_note_points_at_the_download_when_verdicts_were_left_out(owner_client, check, monkeypatch):
    monkeypatch.setattr(audits.views, "CHECKLIST_ROWS", 5)
    body = owner_client.get(check.get_absolute_url()).content.decode()
    assert body.count('<tr class="verdict-') == 5
    note = body[body.index('id="checklist-more"'):body.index("</p>", body.index('id="checklist-more"'))]
    assert "The first 5 of 6 rows" in note
    assert f'href="{reverse("export-verdicts", args=[check.pk])}"' in note
    assert "--mode validate" not in body
