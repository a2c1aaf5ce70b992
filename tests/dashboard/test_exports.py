"""CSV downloads: streamed, UTF-8 with a BOM (for Excel), stable headers, formula injection neutralised."""

import csv
import io

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse

from audits import exports
from tests.dashboard.broken_data import DEAD, DOWN, GONE, SOURCES, add_sources, make_broken_audit
from tests.factories import SITE, make_finished_audit, make_issue, make_link, make_page

pytestmark = pytest.mark.django_db

HOSTILE = ['=HYPERLINK("http://x","click")', "@SUM(1)", "+1", "-1", "\tTabbed", "\rReturned"]
CSV_URLS = ["export-pages", "export-issues", "export-links", "export-broken", "export-changes"]
BOM = b"\xef\xbb\xbf"


def download(client, audit, name):
    """The CSV's rows, once it is checked to be a streamed UTF-8 attachment that starts with a BOM."""
    response = client.get(reverse(name, args=[audit.pk]))
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment;")
    body = b"".join(response.streaming_content)
    assert body.startswith(BOM) and not body[len(BOM):].startswith(BOM)
    text = body[len(BOM):].decode("utf-8")
    return list(csv.reader(io.StringIO(text, newline="")))


@pytest.mark.parametrize("name", CSV_URLS)
def test_every_csv_starts_with_a_utf8_bom_so_excel_reads_it_as_utf8(owner_client, owner, name):
    audit = make_finished_audit(owner)
    make_page(audit, f"{SITE}/crème", title="Crème brûlée — 東京")
    response = owner_client.get(reverse(name, args=[audit.pk]))
    body = b"".join(response.streaming_content)
    assert body[:3] == BOM
    # Readers that know the BOM ("utf-8-sig", as Excel does) see the plain header.
    header = next(csv.reader(io.StringIO(body.decode("utf-8-sig"), newline="")))
    assert header and not header[0].startswith("\ufeff")
    assert header[0] in ("url", "severity", "source_url", "target_url", "change")


def test_every_formula_like_cell_gets_a_leading_quote(owner_client, owner):
    audit = make_finished_audit(owner)
    for n, text in enumerate(HOSTILE):
        page = make_page(audit, f"{SITE}/evil/{n}", title=text, description=text)
        make_issue(audit, "title_length", page.url, page=page, message=text)
        make_link(audit, page.url, f"{SITE}/", anchor=text)

    pages = download(owner_client, audit, "export-pages")
    title, description = pages[0].index("title"), pages[0].index("description")
    evil = [row for row in pages[1:] if "/evil/" in row[0]]
    assert len(evil) == len(HOSTILE)
    for row, text in zip(sorted(evil), HOSTILE, strict=True):
        assert row[title] == "'" + text and row[description] == "'" + text

    issues = download(owner_client, audit, "export-issues")
    message = issues[0].index("message")
    assert sorted(r[message] for r in issues[1:] if r[message].startswith("'")) == sorted("'" + t for t in HOSTILE)

    links = download(owner_client, audit, "export-links")
    anchor = links[0].index("anchor_text")
    assert sorted(r[anchor] for r in links[1:] if r[anchor].startswith("'")) == sorted("'" + t for t in HOSTILE)


def test_the_csvs_have_stable_headers(owner_client, owner):
    audit = make_finished_audit(owner)
    assert download(owner_client, audit, "export-pages")[0] == exports.PAGE_COLUMNS
    assert download(owner_client, audit, "export-issues")[0] == [
        "severity", "code", "title", "page_url", "target_url", "message", "review", "page_status_code",
    ]
    assert download(owner_client, audit, "export-links")[0] == [
        "source_url", "target_url", "tag", "anchor_text", "nofollow", "internal", "target_status_code",
        "target_fetch_error",
    ]


def test_link_issue_rows_carry_the_source_page(owner_client, owner):
    audit = make_finished_audit(owner)
    rows = download(owner_client, audit, "export-issues")
    header = rows[0]
    broken = [dict(zip(header, row, strict=True)) for row in rows[1:] if row[1] == "broken_link_internal"]
    assert {(r["page_url"], r["target_url"]) for r in broken} == {
        (f"{SITE}/", f"{SITE}/gone"), (f"{SITE}/about", f"{SITE}/gone"),
    }
    assert all(r["title"] == "Broken internal link" for r in broken)


def test_pages_and_links_rows_hold_what_was_crawled(owner_client, owner):
    audit = make_finished_audit(owner)
    pages = download(owner_client, audit, "export-pages")
    by_url = {row[0]: dict(zip(pages[0], row, strict=True)) for row in pages[1:]}
    assert len(by_url) == 7
    assert by_url[f"{SITE}/gone"]["status_code"] == "404"
    assert by_url[f"{SITE}/old"]["redirect_chain"] == f"301 {SITE}/old -> {SITE}/about"
    assert by_url["https://elsewhere.example/dead"]["fetch_error"] == "dns_failure"
    links = download(owner_client, audit, "export-links")
    to_gone = [dict(zip(links[0], r, strict=True)) for r in links[1:] if r[1] == f"{SITE}/gone"]
    assert len(to_gone) == 2 and all(r["target_status_code"] == "404" for r in to_gone)


def test_unicode_text_survives_as_utf8(owner_client, owner):
    audit = make_finished_audit(owner)
    make_page(audit, f"{SITE}/ünïcode", title="Crème brûlée — 東京")
    rows = download(owner_client, audit, "export-pages")
    assert any(row[rows[0].index("title")] == "Crème brûlée — 東京" for row in rows)


def test_the_export_reads_rows_in_chunks_with_a_constant_number_of_queries(
        owner_client, owner, django_assert_max_num_queries):
    audit = make_finished_audit(owner)
    for n in range(300):
        make_page(audit, f"{SITE}/bulk/{n}")
    with django_assert_max_num_queries(6):
        rows = download(owner_client, audit, "export-pages")
    assert len(rows) == 1 + 7 + 300


def test_text_cells_are_quoted_so_a_semicolon_cannot_start_a_formula_cell(owner_client, owner):
    # A spreadsheet whose list separator is ";" splits unquoted text there: the
    # "=cmd()" after it would begin a cell of its own, past the leading-quote check.
    audit = make_finished_audit(owner)
    make_page(audit, f"{SITE}/semi", title='Sale;=HYPERLINK("http://x")')
    body = b"".join(owner_client.get(reverse("export-pages", args=[audit.pk])).streaming_content)
    line = next(row for row in body.decode("utf-8-sig").splitlines() if "/semi" in row)
    assert '"Sale;=HYPERLINK(""http://x"")"' in line
    assert line.startswith(f'"{SITE}/semi"')
    # Numbers stay numbers for the reader.
    rows = list(csv.reader(io.StringIO(body.decode("utf-8-sig"), newline=""), quoting=csv.QUOTE_NONNUMERIC))
    header = rows[0]
    status = header.index("status_code")
    assert all(isinstance(row[status], float) or row[status] == "" for row in rows[1:])


def test_neutralise_leaves_numbers_and_plain_text_alone():
    assert exports.neutralise(-1) == -1 and exports.neutralise(404) == 404
    assert exports.neutralise(None) == "" and exports.neutralise(True) == 1
    assert exports.neutralise("plain") == "plain" and exports.neutralise("a=b") == "a=b"
    assert exports.neutralise("-5") == "'-5"


def test_the_broken_csv_has_one_row_per_dead_target_with_its_sources(owner_client, owner):
    audit = make_broken_audit(owner)
    rows = download(owner_client, audit, "export-broken")
    assert rows[0] == exports.BROKEN_COLUMNS == [
        "target_url", "kind", "status_code", "fetch_error", "failure", "linking_pages", "links", "sources",
        "redirected",
    ]
    by_target = {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    assert [row[0] for row in rows[1:]] == [GONE, DEAD, DOWN]  # most linked first, ties by URL
    assert by_target[GONE] == {
        "target_url": GONE, "kind": "internal", "status_code": "404", "fetch_error": "", "failure": "",
        "linking_pages": "4", "links": "5", "sources": " | ".join(SOURCES[:4]), "redirected": "0",
    }
    assert by_target[DEAD]["kind"] == "external" and by_target[DEAD]["fetch_error"] == "dns_failure"
    assert by_target[DEAD]["failure"] == "Host name could not be resolved: elsewhere.example does not exist"
    assert by_target[DOWN]["sources"] == f"{SOURCES[0]} | {SOURCES[4]}"


def test_the_broken_csv_names_the_first_sources_and_counts_them_all(owner_client, owner):
    audit = make_broken_audit(owner)
    add_sources(audit, DOWN, exports.BROKEN_SOURCES + 5)
    rows = download(owner_client, audit, "export-broken")
    down = dict(zip(rows[0], next(r for r in rows[1:] if r[0] == DOWN), strict=True))
    assert down["linking_pages"] == str(2 + exports.BROKEN_SOURCES + 5)
    assert len(down["sources"].split(" | ")) == exports.BROKEN_SOURCES


def test_the_broken_csv_reads_targets_in_batches_with_a_constant_number_of_queries(
        owner_client, owner, django_assert_max_num_queries, monkeypatch):
    audit = make_broken_audit(owner)
    for n in range(30):
        target = f"{SITE}/missing/{n:03d}"
        make_page(audit, target, status_code=410)
        add_sources(audit, target, 1)
    monkeypatch.setattr(exports, "BROKEN_BATCH", 10)
    # The session, its user and the audit, the grouped targets, then two per
    # batch: 33 targets make 4 batches of at most 10.
    with django_assert_max_num_queries(3 + 1 + 2 * 4):
        rows = download(owner_client, audit, "export-broken")
    assert len(rows) == 1 + 3 + 30
    assert {row[2] for row in rows[1:]} == {"404", "410", "500", ""}


def test_a_formula_like_broken_target_is_neutralised(owner_client, owner):
    audit = make_broken_audit(owner)
    add_sources(audit, "=HYPERLINK(\"http://x\")", 1)
    rows = download(owner_client, audit, "export-broken")
    assert "'=HYPERLINK(\"http://x\")" in [row[0] for row in rows[1:]]
