"""Include/exclude patterns through the new-audit form and the `audit` command: RE2's
refusals shown next to the field or as exit 2, and a crawl that honours what passes."""


import pytest
from django.urls import reverse

from audits.forms import AuditForm
from audits.models import Audit
from tests.audit_command import run_audit
from tests.crawler.fixture_site import FixtureSite

pytestmark = pytest.mark.django_db

GOOD = {
    "start_url": "https://www.example.com/", "max_pages": "500", "max_depth": "10", "concurrency": "8",
    "rate": "", "include_patterns": "", "exclude_patterns": "", "respect_robots": "on",
    "check_external": "on", "user_agent": "",
}
HINT = "(Siteward uses RE2 syntax: no backreferences or lookaround)"
REFUSED = [
    ("include_patterns", r"(a)\1"),
    ("exclude_patterns", r"(?=x)"),
    ("exclude_patterns", r"/ok/" "\n" r"/blog/(?<!draft)"),
]


@pytest.mark.parametrize(("field", "text"), REFUSED)
def test_the_form_refuses_what_re2_cannot_run_with_a_message_next_to_the_field(owner_client, field, text):
    response = owner_client.post(reverse("audit-new"), {**GOOD, field: text})
    assert response.status_code == 400
    bad = text.splitlines()[-1]
    message = " ".join(response.context["form"].errors[field])
    assert message.startswith(f"Not a usable regular expression: invalid pattern '{bad}': ")
    assert message.endswith(f"{HINT}.")
    assert f'id="id_{field}_error"' in response.content.decode()
    assert Audit.objects.count() == 0


def test_the_form_still_takes_everyday_patterns():
    form = AuditForm({**GOOD, "include_patterns": r"/blog/\d{4}/" "\n" r"(?i)/docs/",
                      "exclude_patterns": r"\.(pdf|zip)$"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["include_patterns"] == "/blog/\\d{4}/\n(?i)/docs/"


def test_the_form_caps_the_number_of_patterns():
    form = AuditForm({**GOOD, "exclude_patterns": "\n".join(f"/s{i}/" for i in range(51))})
    assert not form.is_valid()
    assert "more than 50 patterns" in " ".join(form.errors["exclude_patterns"])


def test_the_audit_command_exits_2_with_the_forms_message(fast_settings, capsys):
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--include", r"(a)\1") == 2
    err = capsys.readouterr().err
    assert r"--include: Not a usable regular expression: invalid pattern '(a)\1'" in err and HINT in err
    assert run_audit("http://127.0.0.1:9/", "--allow-private", "--exclude", "/ok/", "--exclude", "(?=x)") == 2
    err = capsys.readouterr().err
    assert "--exclude: Not a usable regular expression: invalid pattern '(?=x)'" in err and HINT in err
    assert Audit.objects.count() == 0


def test_a_crawl_honours_include_and_exclude_and_shrugs_off_a_catastrophic_one(fast_settings, tmp_path):
    with FixtureSite() as site:
        code = run_audit(
            site.url("/"), "--allow-private", "--max-pages", "60", "--no-external",
            "--include", r"^http://[^/]+/(products/.*)?$", "--exclude", "/specs$", "--exclude", r"(a+)+$",
        )
        assert code in (0, 1)
        audit = Audit.objects.get()
        assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
        assert site.hits("/products/") == 1 and site.hits("/products/item-1") == 1
        for left_out in ("/products/item-1/specs", "/about", "/blog/", "/blog/post-1", "/landing/spring-sale"):
            assert site.hits(left_out) == 0, left_out
        assert not audit.pages.filter(url__contains="/blog/").exists()
