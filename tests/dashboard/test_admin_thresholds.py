"""A site's check thresholds in the admin: one field each, with the new-audit form's bounds."""

import pytest
from django.urls import reverse

from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def test_the_admin_edits_a_sites_thresholds_one_field_each(superuser_client, owner):
    site = make_audit(owner).site
    url = reverse("admin:audits_site_change", args=[site.pk])
    page = superuser_client.get(url).content.decode()
    assert 'name="title_max"' in page and 'name="thresholds"' not in page
    form = superuser_client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and value is not False}
    data.update(owner=owner.pk, webhook_url="", title_max=75, thin_words=150)
    response = superuser_client.post(url, {**data, "skipped_runs-TOTAL_FORMS": 0, "skipped_runs-INITIAL_FORMS": 0})
    assert response.status_code == 302, response.context["adminform"].form.errors
    site.refresh_from_db()
    assert site.thresholds == {"title_max": 75, "thin_words": 150}
    assert 'value="75"' in superuser_client.get(url).content.decode()
