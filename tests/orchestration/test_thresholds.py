"""An audit's check thresholds (CHECKS.md: defaults that an audit's settings can change): set in the form,
the command and the admin, kept by the site and re-runs, judged by every check that reads one."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.urls import reverse

from audits import thresholds, validation
from audits.crawl.reuse import source_of
from audits.forms import AuditForm
from audits.inline import run_audit_inline
from audits.models import Audit, Site
from audits.services import follow_up, follow_up_fields, rerun_audit
from tests.audit_command import run_audit
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db

# 65 characters: over the default 60, within 70.
TITLE = "A title of sixty-five characters for the threshold tests, exactly"


def html(title: str, links: str = "") -> str:
    return (f'<!doctype html><html lang="en"><head><title>{title}</title><meta name="viewport" '
            f'content="width=device-width"><meta name="description" content="A page of the threshold test site '
            f'with a description long enough to pass every length check."></head><body><h1>{title}</h1>'
            f"<p>Some words.</p>{links}</body></html>")


@pytest.fixture
def chain():
    """/ -> /1 -> /2 -> /3: the last page three clicks deep, each page's title 65 characters."""
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": Answer(html(TITLE, '<a href="/1">1</a>')),
            "/1": Answer(html(TITLE + " 1", '<a href="/2">2</a>')),
            "/2": Answer(html(TITLE + " 2", '<a href="/3">3</a>')),
            "/3": Answer(html(TITLE + " 3")),
        })
        yield site


def crawled(owner, site, **fields) -> Audit:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def codes_on(audit: Audit, code: str) -> set[str]:
    return {url.rsplit("/", 1)[-1] for url in audit.issues.filter(code=code).values_list("url", flat=True)}


def test_the_checks_judge_by_the_audits_thresholds(owner, fast_settings, chain):
    default = crawled(owner, chain)
    assert len(codes_on(default, "title_length")) == 4
    assert codes_on(default, "deep_page") == set()

    changed = crawled(owner, chain, thresholds={"title_max": 70, "deep_depth": 2})
    assert codes_on(changed, "title_length") == set()
    deep = changed.issues.get(code="deep_page")
    assert (deep.url, deep.message) == (chain.url("/3"), "3 clicks from the start page (more than 2)")


def test_the_form_stores_only_the_thresholds_that_differ_from_the_defaults():
    form = AuditForm({"start_url": "http://127.0.0.1:9/", "max_pages": 10, "max_depth": 3, "concurrency": 2,
                      "title_min": "20", "title_max": "70", "slow_ms": ""}, allow_private=True)
    assert form.is_valid(), form.errors
    assert form.audit_fields()["thresholds"] == {"title_max": 70}


@pytest.mark.parametrize(("given", "field", "says"), [
    ({"title_min": "80"}, "title_max", "Must be at least the shortest title (80)."),
    ({"description_min": "100", "description_max": "90"}, "description_max",
     "Must be at least the shortest meta description (100)."),
    ({"slow_ms": "10"}, "slow_ms", "Ensure this value is greater than or equal to 50."),
    ({"deep_depth": "two"}, "deep_depth", "Enter a whole number."),
])
def test_the_form_refuses_thresholds_out_of_bounds_or_the_wrong_way_round(given, field, says):
    form = AuditForm({"start_url": "http://127.0.0.1:9/", "max_pages": 10, "max_depth": 3, "concurrency": 2,
                      **given}, allow_private=True)
    assert not form.is_valid()
    assert form.errors[field] == [says]


def test_the_new_audit_page_offers_the_thresholds_and_an_audit_keeps_them(owner_client, owner, fast_settings,
                                                                        chain):
    page = owner_client.get(reverse("audit-new")).content.decode()
    assert 'id="thresholds"' in page and 'name="title_max"' in page and 'value="60"' in page
    response = owner_client.post(reverse("audit-new"), {
        "start_url": chain.url("/"), "max_pages": 10, "max_depth": 5, "concurrency": 2, "render": "none",
        "respect_robots": "on", "title_max": "70"})
    assert response.status_code == 302, response.content.decode()[:2000]
    audit = Audit.objects.get()
    assert audit.thresholds == {"title_max": 70} and audit.site.thresholds == {"title_max": 70}
    detail = owner_client.get(reverse("audit-detail", args=[audit.pk])).content.decode()
    assert "Longest title 70 characters (default 60)" in detail
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED)
    assert rerun_audit(audit).thresholds == {"title_max": 70}


def test_a_validation_judges_by_its_sources_thresholds_and_a_delta_by_its_own(owner):
    source = make_audit(owner, status=Audit.Status.COMPLETED, origin="https://shop.example",
                        thresholds={"title_max": 70})
    Site.objects.filter(pk=source.site_id).update(thresholds={})  # the site's settings changed since
    assert follow_up(source, Audit.Mode.VALIDATE).thresholds == {"title_max": 70}

    same = make_audit(owner, mode=Audit.Mode.DELTA, source=source, origin="https://shop.example",
                      thresholds={"title_max": 70})
    other = make_audit(owner, mode=Audit.Mode.DELTA, source=source, origin="https://shop.example")
    assert source_of(same) == source.pk
    assert source_of(other) is None  # its page issues were judged by other limits: nothing is reused


def test_a_validation_after_an_upgrade_that_changed_a_default_judges_by_what_its_source_judged_by(
        owner, fast_settings, chain, monkeypatch):
    first = crawled(owner, chain)  # the default longest title, 60: each 65-character title is too long
    assert len(codes_on(first, "title_length")) == 4
    # An upgrade raises the default to 70. The titles did not change: none of them is fixed.
    monkeypatch.setattr(thresholds, "DEFAULTS", dataclasses.replace(thresholds.DEFAULTS, title_max=70))
    check = crawled(owner, chain, **follow_up_fields(first, Audit.Mode.VALIDATE))
    assert check.check_settings().title_max == 60
    assert {v.result for v in validation.checklist(check) if v.code == "title_length"} == {"still"}
    assert "Longest title 60 characters (default 70)" in check.thresholds_described()
    # The first says what it judged by; a new audit, as one a person re-runs from it, judges by the new default.
    assert "Longest title 60 characters (default 70)" in first.thresholds_described()
    assert rerun_audit(first).check_settings().title_max == 70


def test_the_command_takes_thresholds_and_reports_them(owner, fast_settings, chain, tmp_path):
    out = tmp_path / "report.jsonl"
    code = run_audit(chain.url("/"), "--allow-private", "--no-external", "--owner", "owner",
                     "--threshold", "title_max=70", "--threshold", "deep_depth=2", "--out", str(out))
    assert code == 0  # nothing critical: the deep page is a notice
    audit = Audit.objects.get()
    assert audit.thresholds == {"title_max": 70, "deep_depth": 2}
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["thresholds"]["title_max"] == 70 and summary["thresholds"]["title_min"] == 20


@pytest.mark.parametrize(("args", "says"), [
    (["--threshold", "title_longest=70"], "expected NAME=VALUE with NAME one of title_min, title_max"),
    (["--threshold", "title_max=lots"], "--threshold title_max: Enter a whole number."),
    (["--threshold", "title_min=90"], "--threshold title_max: Must be at least the shortest title (90)."),
    (["--threshold", "title_max=70", "--mode", "validate", "--from", "previous"],
     "--threshold cannot be given with --mode validate"),
])
def test_the_command_refuses_bad_thresholds_with_exit_2(owner, fast_settings, capsys, args, says):
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--owner", "owner", *args) == 2
    assert says in capsys.readouterr().err
    assert not Audit.objects.exists()


def test_a_follow_up_from_the_command_judges_by_its_sources_thresholds_and_the_site_keeps_them(
        owner, fast_settings, chain, tmp_path):
    base = [chain.url("/"), "--allow-private", "--no-external", "--owner", "owner"]
    assert run_audit(*base, "--threshold", "title_max=70") == 0
    full = Audit.objects.get()
    for mode in ("delta", "validate"):
        assert run_audit(*base, "--mode", mode, "--from", str(full.pk)) == 0
        follow = Audit.objects.latest("pk")
        assert (follow.mode, follow.thresholds, follow.site.thresholds) == (mode, {"title_max": 70},
                                                                           {"title_max": 70})
    delta = Audit.objects.get(mode="delta")
    assert delta.pages.exclude(unchanged_since=None).exists()  # judged alike, so its pages were reused
