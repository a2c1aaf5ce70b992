"""The exports people share: the XLSX workbook (read back with openpyxl) and the single-file HTML report."""

import inspect
import io
import tempfile
from html.parser import HTMLParser

import pytest
from django.urls import reverse
from django.utils.html import escape
from openpyxl import load_workbook

from audits import report, score, xlsx_export
from audits.models import Audit, Issue, LinkEdge, Page
from crawler.catalogue import CATALOGUE
from tests.dashboard.broken_data import DEAD, DOWN, GONE, SOURCES, add_sources, make_broken_audit
from tests.factories import SITE, make_issue, make_page

pytestmark = pytest.mark.django_db

SHEETS = ["Pages", "Issues", "Broken links", "Links"]


def open_workbook(client, audit):
    response = client.get(reverse("export-xlsx", args=[audit.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == xlsx_export.CONTENT_TYPE
    assert response["Content-Disposition"] == f'attachment; filename="audit-{audit.pk}.xlsx"'
    return load_workbook(io.BytesIO(b"".join(response.streaming_content)))


def rows_of(sheet):
    return [list(row) for row in sheet.iter_rows(values_only=True)]


def test_the_workbook_has_a_sheet_per_table_with_every_row(owner_client, owner):
    audit = make_broken_audit(owner)
    book = open_workbook(owner_client, audit)
    assert book.sheetnames == SHEETS
    pages, issues, broken, links = (rows_of(book[name]) for name in SHEETS)
    assert pages[0][:2] == ["url", "final_url"] and len(pages) == 1 + Page.objects.filter(audit=audit).count()
    assert issues[0][:2] == ["severity", "code"] and len(issues) == 1 + Issue.objects.filter(audit=audit).count()
    assert links[0][:2] == ["source_url", "target_url"] and len(links) == 1 + LinkEdge.objects.filter(audit=audit).count()
    # Broken links by target, as on the screen: 3 targets, most linked first.
    assert broken[0][:3] == ["target_url", "kind", "status_code"]
    assert [(row[0], row[1], row[2], row[5]) for row in broken[1:]] == [
        (GONE, "internal", 404, 4), (DEAD, "external", None, 2), (DOWN, "internal", 500, 2),
    ]
    assert broken[1][7] == " | ".join(SOURCES[:4])


def test_formula_like_text_never_becomes_a_formula_in_the_workbook(owner_client, owner):
    audit = make_broken_audit(owner)
    hostile = ['=HYPERLINK("http://evil","x")', "+1", "-1", "@SUM(A1)", "\x01=cmd()"]
    for n, text in enumerate(hostile):
        page = make_page(audit, f"{SITE}/evil/{n}", title=text)
        make_issue(audit, "title_length", page.url, page=page, message=text)
    add_sources(audit, "=1+1", 1)
    book = open_workbook(owner_client, audit)
    cells = [cell for name in SHEETS for row in book[name].iter_rows() for cell in row]
    assert not [cell.coordinate for cell in cells if cell.data_type == "f"]
    values = {cell.value for cell in cells}
    # Shown as the page has it: an apostrophe would show too, since a workbook's text cell is literal.
    for text in hostile:
        assert text.lstrip("\x01") in values
    assert "=1+1" in values
    assert not [value for value in values if isinstance(value, str) and value.startswith("'")]


def test_a_sheet_past_excels_row_limit_ends_with_a_note(owner):
    audit = make_broken_audit(owner)
    spool = io.BytesIO()
    # 3 broken targets: with room for a header and 3 rows they all fit, with
    # room for 3 rows in all the sheet keeps 1 and says why.
    xlsx_export.write_workbook(audit, spool, max_rows=4)
    broken = rows_of(load_workbook(spool)["Broken links"])
    assert [row[0] for row in broken] == ["target_url", GONE, DEAD, DOWN]
    spool = io.BytesIO()
    xlsx_export.write_workbook(audit, spool, max_rows=3)
    book = load_workbook(spool)
    broken = rows_of(book["Broken links"])
    assert len(broken) == 3 and broken[1][0] == GONE
    assert broken[2][0].startswith("Only the first 1 rows are in this workbook")
    # The README's "each sheet up to 100,000 rows" is the cap a download gets.
    assert inspect.signature(xlsx_export.write_workbook).parameters["max_rows"].default == 100_000
    assert all(book[name].max_row <= 3 for name in SHEETS)


def test_the_workbook_is_spooled_to_a_temporary_file_removed_once_sent(owner_client, owner, tmp_path, monkeypatch):
    audit = make_broken_audit(owner)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    response = owner_client.get(reverse("export-xlsx", args=[audit.pk]))
    assert [p.name for p in tmp_path.iterdir()] == [p.name for p in tmp_path.glob(f"siteward-audit-{audit.pk}-*.xlsx")]
    assert len(list(tmp_path.iterdir())) == 1  # the workbook; openpyxl's own scratch files are gone
    load_workbook(io.BytesIO(b"".join(response.streaming_content)))  # the test client closes it at the end
    assert list(tmp_path.iterdir()) == []


# --- the HTML report ---------------------------------------------------------


class Document(HTMLParser):
    """Every start tag with its attributes, and the text of <style> elements."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.styles: list[str] = []
        self._in_style = False
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self.ids.add(attrs.get("id") or "")
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def get_report(client, audit):
    response = client.get(reverse("export-report", args=[audit.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="audit-{audit.pk}-report.html"'
    html = response.content.decode()
    document = Document()
    document.feed(html)
    document.close()
    return html, document


def test_the_report_is_one_file_that_fetches_nothing(owner_client, owner):
    audit = make_broken_audit(owner)
    make_issue(audit, "title_length", SOURCES[0], message='<script src="https://evil.example/x.js"></script>')
    html, document = get_report(owner_client, audit)
    names = [tag for tag, _ in document.tags]
    assert names[0] == "html" and "style" in names
    for tag in ("script", "link", "img", "iframe", "object", "embed", "video", "audio", "source", "base"):
        assert tag not in names, tag
    for tag, attrs in document.tags:
        assert not {"src", "srcset", "style", "background"} & set(attrs), (tag, attrs)
        # The only links are to the report's own sections.
        assert attrs.get("href", "#").startswith("#"), (tag, attrs)
    styles = " ".join(document.styles)
    assert "url(" not in styles and "@import" not in styles
    assert "/static/" not in html and "@media print" in styles
    assert "&lt;script src=" in html  # crawled text is shown, escaped


def test_the_report_summarises_the_audit_and_says_how_to_fix_each_issue_type(owner_client, owner):
    audit = make_broken_audit(owner)
    html, document = get_report(owner_client, audit)
    assert SITE in html and audit.get_status_display() in html
    assert {"summary", "severity-totals", "type-totals", "issue-types", "broken-targets"} <= document.ids
    # 7 broken internal links (critical), 2 broken external ones (warnings), 1 link to a redirect (notice).
    assert "<strong>7</strong> critical" in html and "<strong>2</strong> warnings" in html
    assert "<strong>1</strong> notices" in html and "<strong>3</strong> dead link targets" in html
    for code in ("broken_link_internal", "broken_link_external", "redirect_internal_link"):
        issue_type = CATALOGUE[code]
        assert f'id="type-{code}-{issue_type.severity.value}"' in html
        for text in (issue_type.title, issue_type.why, issue_type.fix):
            assert text.replace("'", "&#x27;") in html


def test_a_type_found_at_two_severities_is_two_rows_each_listing_and_showing_its_own(owner_client, owner):
    audit = make_broken_audit(owner)
    make_issue(audit, "noindex", f"{SITE}/listed", severity="critical", message="in the sitemap")
    for path in ("/a", "/b"):
        make_issue(audit, "noindex", f"{SITE}{path}", severity="warning", message="not listed")
    issues = reverse("issue-list", args=[audit.pk])
    summary = owner_client.get(audit.get_absolute_url()).content.decode().split('id="summary"')[1]
    for severity, count in (("critical", 1), ("warning", 2)):
        row = summary.split(f'<tr id="code-noindex-{severity}">')[1].split("</tr>")[0]
        assert f'href="{issues}?code=noindex&amp;severity={severity}&amp;review=active"' in row
        assert f"<td>{count}</td>" in row
        listed = owner_client.get(issues, {"code": "noindex", "severity": severity, "review": "active"})
        assert len(listed.context["page_obj"].object_list) == count
    html, _ = get_report(owner_client, audit)
    critical = html.split('id="type-noindex-critical"')[1].split("</section>")[0]
    warning = html.split('id="type-noindex-warning"')[1].split("</section>")[0]
    assert "/listed" in critical and "/a" not in critical and "/a" in warning and "/listed" not in warning


def test_ignored_issues_are_left_out_of_the_report_and_counted(owner_client, owner):
    audit = make_broken_audit(owner)
    audit.issues.filter(target_url=DEAD).update(review=Issue.Review.IGNORED)
    html, document = get_report(owner_client, audit)
    assert "<strong>0</strong> warnings" in html and 'id="type-broken_link_external-' not in html
    assert DEAD not in html and "<strong>2</strong> dead link targets" in html
    assert "2 issues marked ignored are left out of this report." in html


def test_the_report_lists_the_most_linked_broken_targets_and_how_many_more(owner_client, owner, monkeypatch):
    audit = make_broken_audit(owner)
    html, _ = get_report(owner_client, audit)
    assert html.count('class="broken-target"') == 3
    assert html.index(GONE) < html.index(DEAD) < html.index(DOWN)
    assert "Host name could not be resolved" in html and 'id="broken-more"' not in html
    monkeypatch.setattr(report, "TOP_TARGETS", 2)
    html, document = get_report(owner_client, audit)
    assert html.count('class="broken-target"') == 2 and "broken-more" in document.ids
    assert "And 1 more dead URL," in html


def test_the_report_gives_the_health_score_with_its_formula_once_there_is_one(owner_client, owner):
    audit = make_broken_audit(owner)
    html, document = get_report(owner_client, audit)
    assert "score" not in document.ids  # not scored yet (audits.score: written when it completes)
    Audit.objects.filter(pk=audit.pk).update(score=87)
    html, document = get_report(owner_client, audit)
    assert {"score", "score-formula"} <= document.ids
    assert "Health score: <strong>87</strong> / 100" in html
    assert escape(score.FORMULA) in html
    parts = score.breakdown(audit)
    assert f"({parts['critical']} of {parts['pages']} pages with a critical issue" in html


@pytest.mark.parametrize("status", [Audit.Status.FAILED, Audit.Status.CANCELLED])
def test_the_report_of_a_stopped_audit_says_its_cross_page_checks_never_ran(owner_client, owner, status):
    audit = make_broken_audit(owner)
    Audit.objects.filter(pk=audit.pk).update(status=status, failed_phase=Audit.Phase.CRAWLING)
    audit.issues.all().delete()
    html, document = get_report(owner_client, audit)
    assert "No broken links found" not in html and "No issues found.<" not in html
    assert "No broken links are listed yet" in html
    assert "No issues found on the pages crawled before it stopped." in html
    assert "cross-page-note" in document.ids and "run when a crawl finishes" in html

    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, failed_phase="")
    html, document = get_report(owner_client, audit)
    assert "No broken links found." in html and "cross-page-note" not in document.ids


def test_the_audit_page_links_to_every_export(owner_client, owner):
    audit = make_broken_audit(owner)
    body = owner_client.get(reverse("audit-detail", args=[audit.pk])).content.decode()
    for name in ("export-broken", "export-xlsx", "export-report"):
        assert f'href="{reverse(name, args=[audit.pk])}"' in body
