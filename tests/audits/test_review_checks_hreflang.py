"""hreflang return links are judged on the pages that carry the set for themselves:
a sorted variant canonicalised to its page repeats that page's set, and the other
languages need not name the variant back. Found by finalize after a real crawl."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


def page(site: ScriptedSite, title: str, canonical: str, *links: str) -> Answer:
    alternates = "".join(f'<link rel="alternate" hreflang="{lang}" href="{site.url(path)}">'
                         for lang, path in (("en", "/en/"), ("fr", "/fr/"), ("x-default", "/en/")))
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return Answer(f'<!doctype html><html lang="en"><head><title>{title}</title>{alternates}'
                  f'<link rel="canonical" href="{site.url(canonical)}"></head>'
                  f"<body><h1>{title}</h1>{anchors}</body></html>")


def test_a_variant_canonicalised_to_its_page_is_not_owed_return_links(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            # Also served as /en/?sort=new, which names /en/ as its canonical.
            "/en/": page(site, "English home", "/en/", "/fr/", "/en/?sort=new"),
            "/fr/": page(site, "Accueil", "/fr/", "/en/"),
            "/de/": Answer('<!doctype html><html lang="de"><head><title>Deutsch</title>'
                           f'<link rel="alternate" hreflang="en" href="{site.url("/en/")}"></head>'
                           "<body><h1>Deutsch</h1></body></html>"),
        })
        site.pages["/en/"].body += f'<a href="{site.url("/de/")}">de</a>'
        audit = make_audit(owner, start_url=site.url("/en/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert audit.pages.filter(url=site.url("/en/?sort=new"), status_code=200).exists()
    returns = set(Issue.objects.filter(audit=audit, code="hreflang_error", message__contains="does not link back")
                  .values_list("url", "target_url"))
    # /de/ carries its own set: /en/ not naming it back is still reported.
    assert returns == {(site.url("/de/"), site.url("/en/"))}
