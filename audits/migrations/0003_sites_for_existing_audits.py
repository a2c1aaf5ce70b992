"""Existing audits get their sites, and existing issues the hash of their URL (written by hand).

Apart from the schema changes around it: on PostgreSQL a table with pending
deferred-constraint checks from these UPDATEs cannot be altered in the same transaction.
"""

from django.db import migrations, models

from crawler.urls import InvalidURL, normalize, url_hash

SITE_SETTINGS = (
    "max_pages", "max_depth", "concurrency", "rate", "include_patterns", "exclude_patterns",
    "user_agent", "respect_robots", "check_external", "allow_private",
)


def _normalised(url):
    try:
        return normalize(url)
    except InvalidURL:
        return url


def sites_for_existing_audits(apps, schema_editor):
    """One site per owner and normalised start URL, with the newest audit's settings."""
    Audit = apps.get_model("audits", "Audit")
    Site = apps.get_model("audits", "Site")
    sites = {}
    for audit in Audit.objects.order_by("-id").iterator(chunk_size=500):
        key = (audit.owner_id, _normalised(audit.start_url))
        site_id = sites.get(key)
        if site_id is None:
            site = Site.objects.create(owner_id=audit.owner_id, start_url=key[1],
                                       **{name: getattr(audit, name) for name in SITE_SETTINGS})
            site_id = sites[key] = site.pk
        Audit.objects.filter(pk=audit.pk).update(site_id=site_id)


def issue_url_hashes(apps, schema_editor):
    """Existing issues get the hash of the URL they are on (their page's, else computed)."""
    Issue = apps.get_model("audits", "Issue")
    Page = apps.get_model("audits", "Page")
    Issue.objects.filter(page__isnull=False).update(
        url_hash=models.Subquery(Page.objects.filter(pk=models.OuterRef("page_id")).values("url_hash")[:1]))
    rest = Issue.objects.filter(url_hash="").only("id", "url")
    for issue in rest.iterator(chunk_size=1000):
        Issue.objects.filter(pk=issue.pk).update(url_hash=url_hash(issue.url))

class Migration(migrations.Migration):

    dependencies = [
        ('audits', '0002_sites_and_changes'),
    ]

    operations = [
        migrations.RunPython(sites_for_existing_audits, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(issue_url_hashes, migrations.RunPython.noop, elidable=True),
    ]
