"""The new-audit form: one start URL and the limits the crawl runs with.

Everything a person can get wrong is caught here, with a message next to the
field, before any row exists: a URL that does not parse, a scheme other than
http(s), a host that does not resolve, an address the SSRF guard refuses,
limits out of range, a pattern that is not a regular expression.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from croniter import CroniterBadDateError, croniter
from django import forms
from django.conf import settings
from django.db import IntegrityError, transaction

from crawler.errors import DnsFailure, UnsafeAddress
from crawler.net import AddressGuard
from crawler.urls import InvalidURL, compile_patterns, holds_userinfo, normalize

from .address_input import AddressInput, URLAddressInput
from .models import IgnoreRule, IssueCode, Site
from .models.audit import RENDER_CHOICES
from .models.site import WebhookURLValidator, time_zone_choices
from .schedules import scheduled_sites_left as schedules_left
from .thresholds import BY_NAME, RANGES, THRESHOLDS, Threshold, overrides_of

# Bounds on what one audit may ask for. They keep a typo (max pages 10000000)
# from turning into a week-long crawl and match what the crawler is sized for.
MAX_PAGES = 100_000
MAX_DEPTH = 100
MAX_CONCURRENCY = 32
MIN_RATE, MAX_RATE = 0.1, 100.0

# Tests swap this for a stub so no test ever asks a real DNS server anything.
resolver = None


def address_guard(*, allow_private: bool):
    """The crawler's SSRF guard, configured the way the crawl will be."""
    if resolver is not None:
        return AddressGuard(allow_private=allow_private, resolver=resolver)
    return AddressGuard(allow_private=allow_private)


# A cron expression's shortest gap between runs is judged over this many runs (a year of weekly ones).
MIN_GAP_SAMPLES = 60

# croniter's random ("R") and hashed ("H") values: a random one is drawn anew each time the
# expression is read, so the fire would never be judged one of the site's run times.
_RANDOM_CRON_VALUE = re.compile(r"(?:^|[\s,])[RrHh](?=$|[\s,(/])")

# Schemes written without "//" that people paste by mistake.
_OTHER_SCHEMES = frozenset({"javascript", "data", "mailto", "file", "tel", "about", "blob", "view-source"})


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# Why an address is refused, said for what the URL is for: a crawl's start, or where alerts are posted.
_AUDIT_REFUSAL = ("Siteward refuses private, loopback and reserved addresses so that audits cannot reach internal "
                  "services; to audit such sites, the administrator can set SITEWARD_ALLOW_PRIVATE=1.")
_WEBHOOK_REFUSAL = ("Siteward does not post alerts to private, loopback or reserved addresses, so that they cannot "
                    "reach internal services; the administrator can allow private ones with SITEWARD_ALLOW_PRIVATE=1.")


def _check_address(url: str, *, allow_private: bool, refusal: str = _AUDIT_REFUSAL) -> None:
    """Resolve the host now so a typo or a refused address is reported here, not as a failed audit.

    The crawl resolves and checks again at every connection (an answer can
    change between now and then); this is only the early, friendly check.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address_guard(allow_private=allow_private).resolve_sync(host, port)
    except UnsafeAddress as exc:
        # A name's address is not repeated: a form would otherwise map a private network's names for anyone.
        if exc.address and exc.address == host.strip("[]"):
            what = f"{host} is a {exc.reason} address."
        elif exc.reason:
            what = f"{host} points at a {exc.reason} address."
        else:
            what = f"{host} points at a refused address."
        raise forms.ValidationError(f"{what} {refusal}", code="ssrf") from None
    except DnsFailure as exc:
        raise forms.ValidationError(
            f"The host {host} does not resolve ({exc}). Check the spelling.", code="dns"
        ) from None


def _threshold_field(threshold: Threshold) -> forms.IntegerField:
    return forms.IntegerField(
        label=f"{threshold.label} ({threshold.unit})", required=False, initial=threshold.default,
        min_value=threshold.minimum, max_value=threshold.maximum,
        help_text=f"Default {threshold.default:,}; leave empty for the default.",
    )


# One optional field per check threshold, named for it (audits.thresholds).
ThresholdFields = type("ThresholdFields", (forms.Form,), {t.name: _threshold_field(t) for t in THRESHOLDS})


class CrawlSettingsForm(ThresholdFields):
    """The crawl settings and their bounds: the new-audit form's, and the admin's for a saved site.

    One set of fields and checks, so a site edited in the admin cannot be given
    limits or patterns the dashboard would refuse.
    """

    max_pages = forms.IntegerField(label="Max pages", min_value=1, max_value=MAX_PAGES, initial=500)
    max_depth = forms.IntegerField(label="Max click depth", min_value=0, max_value=MAX_DEPTH, initial=10)
    concurrency = forms.IntegerField(
        label="Concurrency", min_value=1, max_value=MAX_CONCURRENCY, initial=8,
        help_text="Requests in flight at most; the crawl adapts below this when the site slows down.",
    )
    rate = forms.FloatField(
        label="Rate limit (requests per second)", required=False, min_value=MIN_RATE, max_value=MAX_RATE,
        help_text="Leave empty for no limit beyond the concurrency.",
    )
    include_patterns = forms.CharField(
        label="Include patterns", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Regular expressions, one per line; only matching URLs are crawled.",
    )
    exclude_patterns = forms.CharField(
        label="Exclude patterns", required=False, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Regular expressions, one per line; matching URLs are skipped.",
    )
    respect_robots = forms.BooleanField(label="Obey robots.txt", required=False, initial=True)
    check_external = forms.BooleanField(label="Check external links", required=False, initial=True)
    user_agent = forms.CharField(
        label="User agent", required=False, max_length=300,
        help_text="Leave empty for Siteward's own.",
    )
    render = forms.ChoiceField(
        label="JavaScript", choices=RENDER_CHOICES, initial="none", required=False,
        help_text="Render pages in headless Chromium to audit what browsers see (slower; needs a render "
                  "worker). Auto renders only pages whose HTML looks like an app shell.",
    )

    def _clean_patterns(self, name: str) -> str:
        text = self.cleaned_data.get(name, "")
        try:
            compile_patterns(_lines(text))
        except ValueError as exc:
            raise forms.ValidationError(f"Not a usable regular expression: {exc}.", code="pattern") from None
        return "\n".join(_lines(text))

    def clean_include_patterns(self) -> str:
        return self._clean_patterns("include_patterns")

    def clean_exclude_patterns(self) -> str:
        return self._clean_patterns("exclude_patterns")

    def clean_user_agent(self) -> str:
        value = self.cleaned_data.get("user_agent", "").strip()
        # A header value with a control character would be refused (or worse,
        # split into two headers) when the crawler sends it.
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise forms.ValidationError("The user agent may not contain control characters.", code="ua")
        return value

    def clean_render(self) -> str:
        # Optional in the form (an older client sends none); the model's column is never empty.
        return self.cleaned_data.get("render") or "none"

    def clean(self):
        data = super().clean()
        for shorter, longer in RANGES:
            low, high = (data.get(name) or BY_NAME[name].default for name in (shorter, longer))
            if shorter not in self.errors and longer not in self.errors and low > high:
                self.add_error(longer, forms.ValidationError(
                    f"Must be at least the {BY_NAME[shorter].label.lower()} ({low:,}).", code="range"))
        return data

    def thresholds(self) -> dict[str, int]:
        """The thresholds to store: the ones given that differ from the defaults."""
        return overrides_of(self.cleaned_data)


# The stored start URL's column width (Site.start_url, Audit.start_url), checked once the URL is normalised.
START_URL_MAX = 2048


class AuditForm(CrawlSettingsForm):
    start_url = forms.CharField(
        label="Start URL", max_length=START_URL_MAX,
        widget=AddressInput(attrs={"placeholder": "https://example.com/", "autofocus": True}),
    )

    field_order = ["start_url"]

    def __init__(self, *args, allow_private: bool | None = None, **kwargs):
        """``allow_private`` defaults to the deployment's setting; the CLI passes --allow-private."""
        super().__init__(*args, **kwargs)
        if allow_private is None:
            allow_private = settings.SITEWARD["ALLOW_PRIVATE_TARGETS"]
        self.allow_private = bool(allow_private)
        self.fields["user_agent"].widget.attrs["placeholder"] = settings.SITEWARD["USER_AGENT"]

    def clean_start_url(self) -> str:
        raw = self.cleaned_data["start_url"].strip()
        scheme = raw.split("://", 1)[0].lower() if "://" in raw else ""
        if not scheme and raw.split(":", 1)[0].lower() in _OTHER_SCHEMES:
            scheme = raw.split(":", 1)[0].lower()
        if scheme and scheme not in ("http", "https"):
            raise forms.ValidationError(
                f"Only http:// and https:// addresses can be audited, not {scheme}:.", code="scheme"
            )
        if not scheme:
            raise forms.ValidationError(
                "Write the full address including http:// or https://, e.g. https://example.com/.",
                code="no_scheme",
            )
        try:
            userinfo = holds_userinfo(raw)
            url = normalize(raw)
        except (InvalidURL, ValueError) as exc:
            raise forms.ValidationError(f"This is not a valid web address: {exc}.", code="invalid") from None
        if userinfo:
            # Dropped, it would leave the crawl unauthenticated with no word said; kept, it would be stored
            # and shown in the clear.
            raise forms.ValidationError(
                "This address holds a user name or password: give the address alone, and set basic auth on the "
                "site's Access screen (or --auth-basic-env on the command line), where it is stored encrypted.",
                code="userinfo")
        if len(url) > START_URL_MAX:
            # Percent-encoding makes a non-Latin address up to nine times as long as typed.
            raise forms.ValidationError(
                f"This address is {len(url):,} characters long once encoded (é is %C3%A9); the limit is "
                f"{START_URL_MAX:,}.", code="too_long")
        _check_address(url, allow_private=self.allow_private)
        return url

    @staticmethod
    def initial_for(site: Site) -> dict:
        """The form filled with ``site``'s saved settings: changing one of them keeps the others."""
        values = {name: getattr(site, name) for name in CrawlSettingsForm.base_fields if hasattr(site, name)}
        return {**values, **{t.name: (site.thresholds or {}).get(t.name, t.default) for t in THRESHOLDS},
                "start_url": site.start_url}

    def changes_to(self, site: Site) -> list[str]:
        """How this audit's settings differ from the ones ``site`` saved, for people: they become the site's."""
        fields = self.audit_fields()
        changes = []
        for name, field in CrawlSettingsForm.base_fields.items():
            if name in BY_NAME or not hasattr(site, name):
                continue
            before, after = getattr(site, name), fields[name]
            if before != after:
                changes.append(f"{field.label.lower()} changed" if name in _LONG_SETTINGS
                               else f"{field.label.lower()} {_shown(before)} → {_shown(after)}")
        before, after = site.thresholds or {}, fields["thresholds"]
        changes += [f"{t.label.lower()} {before.get(t.name, t.default):,} → {after.get(t.name, t.default):,}"
                    for t in THRESHOLDS if before.get(t.name, t.default) != after.get(t.name, t.default)]
        return changes

    def audit_fields(self) -> dict:
        """The cleaned values as Audit field values, for services.create_audit."""
        data = self.cleaned_data
        return {
            "start_url": data["start_url"],
            "max_pages": data["max_pages"],
            "max_depth": data["max_depth"],
            "concurrency": data["concurrency"],
            "rate": data["rate"],
            "include_patterns": data["include_patterns"],
            "exclude_patterns": data["exclude_patterns"],
            "respect_robots": data["respect_robots"],
            "check_external": data["check_external"],
            "user_agent": data["user_agent"],
            "allow_private": self.allow_private,
            "render": data["render"],
            "thresholds": self.thresholds(),
        }


# Said to have changed, not shown: a few lines of patterns would drown the message.
_LONG_SETTINGS = frozenset({"include_patterns", "exclude_patterns", "user_agent"})


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


class WebhookURLField(forms.URLField):
    """A URL field whose host may be a single label (a service name such as ``alertmanager``)."""

    default_validators = [WebhookURLValidator()]


class SiteScheduleForm(forms.ModelForm):
    """A site's schedule and alerts, in the owner's time zone."""

    time_zone = forms.ChoiceField(label="Time zone", choices=time_zone_choices)
    scheduled_mode = forms.ChoiceField(label="Each run", required=False, choices=Site._meta.get_field(
        "scheduled_mode").choices, help_text=Site._meta.get_field("scheduled_mode").help_text)
    webhook_url = WebhookURLField(label="Webhook URL", required=False, max_length=2048, assume_scheme="https",
                                  widget=URLAddressInput(),
                                  help_text="Optional: a JSON summary is POSTed here with each alert.")

    class Meta:
        model = Site
        fields = ["cadence", "minute", "hour", "weekday", "cron", "time_zone", "scheduled_mode", "notify_severity",
                  "notify_on_failure", "notify_email", "webhook_url"]
        labels = {
            "cadence": "Run", "minute": "Minute", "hour": "Hour", "weekday": "Day",
            "cron": "Cron expression", "scheduled_mode": "Each run", "notify_severity": "Alert on new issues at or above",
            "notify_on_failure": "Alert when a scheduled audit fails", "notify_email": "E-mail me",
        }
        help_texts = {
            "minute": "0-59", "hour": "0-23, in the time zone below",
            "cron": "minute hour day-of-month month day-of-week, e.g. 30 2 * * 1-5",
        }
        widgets = {"minute": forms.NumberInput(attrs={"min": 0, "max": 59}),
                   "hour": forms.NumberInput(attrs={"min": 0, "max": 23})}

    def clean_scheduled_mode(self) -> str:
        # Optional in the form: a schedule saved without it (an older client, the admin) runs full crawls.
        return self.cleaned_data.get("scheduled_mode") or "full"

    def clean_minute(self) -> int:
        return _in_range(self.cleaned_data["minute"], 0, 59)

    def clean_hour(self) -> int:
        return _in_range(self.cleaned_data["hour"], 0, 23)

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data.get("webhook_url", "").strip()
        if not url:
            return ""
        if urlsplit(url).scheme not in ("http", "https"):
            raise forms.ValidationError("A webhook must be an http:// or https:// address.", code="scheme")
        if holds_userinfo(url):
            # It would be stored and shown in the clear, and sent as basic auth even over http://.
            raise forms.ValidationError(
                "A webhook address may not hold a user name or password: the address is stored and shown as "
                "it is. Use a receiver that takes a token in its path or query.", code="userinfo")
        # URLField lets any five digits through as a port; urlsplit raises past 65535.
        try:
            port = urlsplit(url).port
        except ValueError:
            port = 0
        if port == 0:
            raise forms.ValidationError("The port must be a number from 1 to 65535.", code="port")
        host = urlsplit(url).hostname or ""
        allow_private = settings.SITEWARD["ALLOW_PRIVATE_TARGETS"]
        # A name without a dot (a Docker or Kubernetes service) only an internal resolver answers, through
        # this server's search domains: it is a private target, refused unasked where those are refused.
        if not allow_private and host != "localhost" and "." not in host and ":" not in host:
            raise forms.ValidationError(
                f"{host} is a host name without a domain, which only a private network resolves. "
                f"{_WEBHOOK_REFUSAL}", code="single_label")
        # The same early check as a start URL: a webhook is a request this server makes.
        _check_address(url, allow_private=allow_private, refusal=_WEBHOOK_REFUSAL)
        return url

    def clean(self):
        data = super().clean()
        cadence = data.get("cadence")
        if cadence == Site.Cadence.CRON:
            self._check_cron(data.get("cron", "").strip())
        least = settings.SITEWARD["MIN_SCHEDULE_MINUTES"]
        if cadence == Site.Cadence.HOURLY and least > 60:
            # The deployment's shortest gap binds every cadence, not only a cron expression.
            self.add_error("cadence", forms.ValidationError(
                f"Hourly runs are not allowed here: at most once every {least} minutes. Choose daily, weekly "
                "or a cron expression.", code="too_often"))
        owner = data.get("owner") or self.instance.owner_id  # the admin's form has the owner field
        if cadence and not data.get("paused", self.instance.paused) and owner:
            if schedules_left(owner, self.instance) <= 0:
                raise forms.ValidationError(
                    f"You already have {settings.SITEWARD['MAX_SCHEDULED_SITES_PER_USER']} scheduled sites; "
                    "unschedule one first.", code="quota")
        return data

    def _check_cron(self, expression: str) -> None:
        if not expression:
            self.add_error("cron", forms.ValidationError("Write a cron expression.", code="required"))
            return
        if len(expression.split()) != 5 or not croniter.is_valid(expression):
            self.add_error("cron", forms.ValidationError(
                "Not a cron expression: five fields, minute hour day-of-month month day-of-week.", code="cron"))
            return
        if _RANDOM_CRON_VALUE.search(expression):
            self.add_error("cron", forms.ValidationError(
                "Random (R) and hashed (H) values are not supported: write the minute and hour as numbers.",
                code="random"))
            return
        least = settings.SITEWARD["MIN_SCHEDULE_MINUTES"]
        runs = croniter(expression, datetime(2026, 1, 1, tzinfo=UTC))
        try:
            times = [runs.get_next(datetime) for _ in range(MIN_GAP_SAMPLES)]
        except CroniterBadDateError:
            # Valid syntax naming a date that never comes (31 February): croniter gives up looking.
            self.add_error("cron", forms.ValidationError(
                "That schedule never runs: no date matches it (e.g. 30 or 31 February).", code="never"))
            return
        gap = min((b - a for a, b in itertools.pairwise(times)), default=timedelta.max)
        if gap < timedelta(minutes=least):
            self.add_error("cron", forms.ValidationError(
                f"That runs every {int(gap.total_seconds() // 60)} minutes; at most once every {least} minutes "
                "is allowed.", code="too_often"))


def _in_range(value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise forms.ValidationError(f"Between {low} and {high}.", code="range")
    return value


DUPLICATE_RULE = "The site already has this rule."


class IgnoreRuleForm(forms.ModelForm):
    """A site's ignore rule: an issue type, and an RE2 pattern checked as strictly as crawl patterns."""

    class Meta:
        model = IgnoreRule
        fields = ["code", "pattern"]
        labels = {"code": "Issue type", "pattern": "On URLs matching"}
        help_texts = {"pattern": "A regular expression (RE2) searched in the URL of the page the issue is on, "
                                 "e.g. ^https://example\\.com/archive/ ; empty for every URL."}

    def __init__(self, *args, codes=None, found=None, **kwargs):
        """``codes``: the (value, label) choices to offer, e.g. the types an audit has; default every type.
        ``found``: with every type offered, the types the site's latest audit has, offered first as a group."""
        super().__init__(*args, **kwargs)
        labels = dict(IssueCode.choices)
        offered = codes if codes is not None else sorted(IssueCode.choices, key=lambda choice: choice[1])
        choices = [(value, labels.get(value, value)) for value, _ in offered]
        if found:
            first = {value for value, _ in found}
            choices = [("In the latest audit", list(found)),
                       ("Every other type", [choice for choice in choices if choice[0] not in first])]
        self.fields["code"].choices = [("", "Choose a type"), *choices]

    def clean_pattern(self) -> str:
        pattern = self.cleaned_data.get("pattern", "").strip()
        try:
            compile_patterns([pattern])
        except ValueError as exc:
            raise forms.ValidationError(f"Not a usable regular expression: {exc}.", code="pattern") from None
        return pattern

    def clean(self):
        data = super().clean()
        # The unique (site, code, pattern) constraint is not checked by the model
        # form, since site is not one of its fields.
        site_id = self.instance.site_id
        same = IgnoreRule.objects.filter(site_id=site_id, code=data.get("code"), pattern=data.get("pattern", ""))
        if site_id and same.exclude(pk=self.instance.pk).exists():
            raise forms.ValidationError(DUPLICATE_RULE, code="duplicate")
        return data

    def save_new(self) -> IgnoreRule | None:
        """Save the rule; None, with the duplicate error on the form, when the same rule was saved since
        clean() looked (a double click sends two posts that both pass it)."""
        try:
            with transaction.atomic():
                return self.save()
        except IntegrityError:
            self.add_error(None, forms.ValidationError(DUPLICATE_RULE, code="duplicate"))
            return None
