"""The admin: staff review every audit, its pages and issues.

Actions go through ``audits.services`` (the same code the screens use), so the
admin cannot put an audit in a state the dashboard could not. django-q2's own
admin is limited to superusers: a Schedule can run any importable function.
"""

from datetime import timedelta

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import model_ngettext
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy

from config.client_ip import client_address

from . import schedules
from .forms import CrawlSettingsForm, SiteScheduleForm
from .models import Audit, Issue, Notification, Page, Site, SkippedRun
from .page_views import STATUS_CLASSES
from .purge import AuditInUse, delete_site_soon, delete_soon, reusers
from .services import (
    PrivateTargetsRefused,
    QuotaExceeded,
    SiteBusy,
    SourceGone,
    cancel_audit,
    rerun_audit,
    resume_audit,
)


class PurgedDelete:
    """Deletes as the dashboard does, and a delete page that counts what goes rather than listing it.

    ``delete_later`` (``purge.delete_soon``) marks the object deleting, which
    takes it off the admin's lists (``get_queryset``), and enqueues a worker's
    purge once the admin's transaction commits: a big audit's rows take longer
    to go than a proxy waits for the request. Django's page would load and list
    every related row, an audit's millions of link edges; as Django's, this one
    asks for the delete permission on the ``related`` models and refuses while
    ``delete_protected`` names anything. List ``delete_selected`` in ``actions``
    for the list's delete action to say what it queued and what it could not.
    """

    delete_later = None  # purge.delete_soon or purge.delete_site_soon, as a staticmethod
    related: tuple = ()

    def delete_model(self, request, obj):
        self.delete_later(obj)

    def delete_queryset(self, request, queryset) -> tuple[list, list[str]]:
        """Delete each of ``queryset`` as ``delete_model`` does; return those queued and why any was refused."""
        # No transaction around them: each deletion stands alone, and one a new reuser refuses leaves the others be.
        queued, refused = [], []
        for obj in queryset:
            try:
                self.delete_later(obj)
            except AuditInUse as exc:
                refused.append(str(exc))
            else:
                queued.append(obj)
        return queued, refused

    @admin.action(permissions=["delete"], description=gettext_lazy("Delete selected %(verbose_name_plural)s"))
    def delete_selected(self, request, queryset):
        """Django's action, which this replaces where ``actions`` lists it; once confirmed, this one says how many
        were queued and why any was refused, where Django's "Successfully deleted" counts every one selected."""
        if request.POST.get("post"):
            _, _, perms_needed, protected = self.get_deleted_objects(queryset, request)
            if perms_needed:
                raise PermissionDenied
            if not protected:
                queued, refused = self.delete_queryset(request, queryset)
                if queued:
                    # Only those queued, so after, unlike Django's: marked deleting, each still has its key.
                    self.log_deletions(request, queued)
                    items = model_ngettext(self.opts, len(queued))
                    self.message_user(request, f"Queued {len(queued)} {items} for deletion in the background.",
                                      messages.SUCCESS)
                for reason in refused:
                    self.message_user(request, reason, level=messages.ERROR)
                return None
        # The confirmation page, or the page that says why they cannot go.
        return django_delete_selected(self, request, queryset)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except AuditInUse as exc:
            # A delta or validation started from it after delete_protected looked: the transaction rolled
            # back, and the delete page shown again names what reuses it.
            self.message_user(request, str(exc), level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def response_delete(self, request, obj_display, obj_id):
        """Django's answer to a confirmed delete, saying the object was queued where Django's says deleted."""
        if IS_POPUP_VAR in request.POST:
            return super().response_delete(request, obj_display, obj_id)
        self.message_user(request, f"The {self.opts.verbose_name} “{obj_display}” is queued for deletion "
                                   "in the background.", messages.SUCCESS)
        # The list it was deleted from, filters kept, for who may see it (Django asks for change, which the
        # audit admin never gives); the admin's home for who may not.
        if not self.has_view_or_change_permission(request):
            return HttpResponseRedirect(reverse("admin:index", current_app=self.admin_site.name))
        post_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist",
                           current_app=self.admin_site.name)
        preserved = {"preserved_filters": self.get_preserved_filters(request), "opts": self.opts}
        return HttpResponseRedirect(add_preserved_filters(preserved, post_url))

    def delete_counts(self, objs) -> dict[str, int]:
        return {}

    def delete_protected(self, objs) -> list[str]:
        return []

    def get_deleted_objects(self, objs, request):
        opts = self.opts
        deleted = [f"{opts.verbose_name.capitalize()}: {obj}" for obj in objs]
        counts = {opts.verbose_name_plural: len(deleted),
                  **{name: n for name, n in self.delete_counts(objs).items() if n}}
        perms_needed = set() if self.has_delete_permission(request) else {opts.verbose_name}
        for model in self.related:
            if not self.admin_site.get_model_admin(model).has_delete_permission(request):
                perms_needed.add(model._meta.verbose_name)
        return deleted, counts, perms_needed, self.delete_protected(objs)


# Audit.robots_body, up to 512 KB an audit: never shown in the admin, so never read into a list's rows.
BIG = "robots_body"


def with_audit(queryset):
    """The rows of ``queryset`` an admin list shows: their audit joined in (all of it but ``BIG``), and none of
    an audit or a site being deleted. Those are gone at once, as from the audit and site lists; a change page
    reads its row through here too, so one of theirs answers as if already deleted."""
    # The audit's flag is read on the join select_related makes anyway; the site's is one more join by key.
    live = queryset.filter(audit__deleting=False, audit__site__deleting=False)
    return live.select_related("audit").defer(f"audit__{BIG}")


def in_use(audits) -> list[str]:
    """Why each of ``audits`` that an active audit reuses cannot be deleted now (``purge.reusers``)."""
    return [f"Audit {audit.pk}: running audit {busy[0]} reuses its results" for audit in audits
            if (busy := reusers(audit))]


@admin.register(Audit)
class AuditAdmin(PurgedDelete, admin.ModelAdmin):
    list_display = ["id", "start_url", "owner", "status", "phase", "trigger", "mode", "progress", "issues_critical",
                    "error_code", "created_at"]
    list_filter = ["status", "trigger", "mode", "error_code", "created_at"]
    search_fields = ["start_url", "origin", "owner__username"]
    list_select_related = ["owner"]
    readonly_fields = ["status", "phase", "error_code", "error_detail", "failed_phase", "origin", "links_indexed",
                       "pages_crawled", "pages_discovered", "pages_failed", "issues_critical",
                       "issues_warning", "issues_notice", "current_window", "chunks_done",
                       "created_at", "created_from", "started_at", "finished_at", "heartbeat_at", "robots_status",
                       "robots_http_status", "sitemap_found", "trigger", "change_counts", "mode", "source"]
    exclude = ["robots_body"]
    actions = ["delete_selected", "cancel_audits", "resume_audits", "rerun_audits"]

    # Audits are made by the form or the command (its checks: SSRF, quota) and
    # change only through the actions: staff editing start_url, allow_private,
    # the owner or the limits would retarget a crawl past those checks. View-only
    # rather than all-read-only fields: a Save would write back stale counters.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    # The actions change an audit's state, so they ask for the audit change permission, read
    # from the user: has_change_permission above is False for everyone, to keep the form closed.
    def has_operate_permission(self, request):
        return request.user.has_perm(f"{self.opts.app_label}.{get_permission_codename('change', self.opts)}")

    delete_later = staticmethod(delete_soon)
    related = (Page, Issue, Notification)

    def get_queryset(self, request):
        # One being deleted is gone at once, as on the dashboard (access.audit_for_user): still listed, it would
        # look like a failed delete.
        return super().get_queryset(request).filter(deleting=False, site__deleting=False).defer(BIG)

    def delete_counts(self, objs):
        return {"pages": sum(audit.pages_crawled for audit in objs)}

    def delete_protected(self, objs):
        return in_use(objs)

    @admin.display(description="Progress")
    def progress(self, audit):
        return f"{audit.pages_crawled} / {audit.pages_discovered} pages"

    @admin.action(description="Cancel the selected audits", permissions=["operate"])
    def cancel_audits(self, request, queryset):
        done = sum(1 for audit in queryset if cancel_audit(audit, by=request.user))
        self.message_user(request, f"Cancelled {done} audit(s); audits already ended were left alone.")

    @admin.action(description="Resume the selected failed or cancelled audits", permissions=["operate"])
    def resume_audits(self, request, queryset):
        done, refused = 0, []
        for audit in queryset:
            try:
                if resume_audit(audit):
                    done += 1
            except PrivateTargetsRefused as exc:
                refused.append(str(exc))
            except (QuotaExceeded, SiteBusy) as exc:
                refused.append(f"Audit {audit.pk}: {exc}")
        self.message_user(request, f"Resumed {done} audit(s); only failed or cancelled ones can resume.")
        for reason in refused:
            self.message_user(request, reason, level=messages.WARNING)

    @admin.action(description="Re-run the selected audits as new audits", permissions=["operate"])
    def rerun_audits(self, request, queryset):
        started, refused = 0, []
        for audit in queryset:
            try:
                rerun_audit(audit, address=client_address(request))
                started += 1
            except PrivateTargetsRefused as exc:
                refused.append(str(exc))
            except (QuotaExceeded, SiteBusy, SourceGone) as exc:
                refused.append(f"Audit {audit.pk}: {exc}")
        self.message_user(request, f"Started {started} new audit(s).")
        for reason in refused:
            self.message_user(request, reason, level=messages.WARNING)


class StatusClassFilter(admin.SimpleListFilter):
    """Status by class, as the pages screen filters: a filter on the raw field would list its values
    with a DISTINCT over every page of every audit on each load."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [(name, name) for name in STATUS_CLASSES]

    def queryset(self, request, queryset):
        return queryset.filter(STATUS_CLASSES[self.value()]) if self.value() in STATUS_CLASSES else queryset


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ["url", "audit", "kind", "status_code", "depth", "fetch_error", "ttfb_ms"]
    list_filter = ["kind", StatusClassFilter, "fetch_error"]
    search_fields = ["url", "title"]
    list_select_related = ["audit"]
    raw_id_fields = ["audit"]
    # Up to 100,000 characters of ids a page: what anchor_missing compares with, neither shown nor read here.
    exclude = ["anchors"]
    # Pages and issues of every audit are millions of rows: this skips the second, unfiltered COUNT of a
    # filtered list; the paginator still counts what the filters leave.
    show_full_result_count = False
    # Newest first by the primary key: Meta.ordering (depth, id) would sort every page of every audit.
    ordering = ["-id"]

    def get_queryset(self, request):
        return with_audit(super().get_queryset(request)).defer("anchors")

    # What the crawl fetched: viewed here, never made or edited by hand.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# What the crawl found, shown but never edited: only the review is a person's to change.
ISSUE_FACTS = ["audit", "page", "code", "severity", "message", "url", "url_hash", "target_url", "key", "change",
               "created_at"]


@admin.register(Issue)
class IssueAdmin(admin.ModelAdmin):
    list_display = ["code", "severity", "url", "target_url", "audit", "review", "change"]
    # No filter by audit: its sidebar would list every audit on each load. An audit's issues
    # are a click away on its own page, and ?audit__id__exact=N still filters here.
    list_filter = ["severity", "code", "review", "change"]
    search_fields = ["url", "target_url", "message"]
    list_select_related = ["audit"]
    show_full_result_count = False
    fields = ISSUE_FACTS + ["review"]
    readonly_fields = ISSUE_FACTS
    actions = ["mark_reviewed", "mark_ignored", "mark_open"]

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        return with_audit(super().get_queryset(request))

    def save_model(self, request, obj, form, change):
        if "review" in form.changed_data:
            # Only the review is editable: through Audit.set_review, as the actions and the triage screen,
            # so the totals, the score, the later audits and "reopened" follow.
            obj.audit.set_review(Issue.objects.filter(pk=obj.pk), obj.review)
            return
        super().save_model(request, obj, form, change)

    def _mark(self, request, queryset, review):
        if request.POST.get("select_across") == "1":
            # "All matching" leaves ignored issues alone unless the filter asks for them, as the triage
            # screen's (triage_views.issue_review): else every ignore would become reviewed, or reopened for good.
            if request.GET.get("review__exact") != Issue.Review.IGNORED:
                queryset = queryset.exclude(review=Issue.Review.IGNORED)
            # And one audit at a time: each audit marked is a set_review and a rescore inside this request.
            if len(queryset.order_by().values_list("audit_id", flat=True).distinct()[:2]) > 1:
                self.message_user(request, "“All matching” marks one audit's issues at a time: filter the list "
                                           "by one audit (?audit__id__exact=<id>) first.", level=messages.ERROR)
                return
        # Through Audit.set_review, audit by audit, so each audit's totals and score follow.
        count = 0
        for audit in Audit.objects.filter(pk__in=queryset.values("audit_id")):
            count += audit.set_review(queryset.filter(audit=audit), review)
        self.message_user(request, f"Marked {count} issue(s) as {Issue.Review(review).label.lower()}.")

    @admin.action(description="Mark the selected issues as reviewed", permissions=["change"])
    def mark_reviewed(self, request, queryset):
        self._mark(request, queryset, Issue.Review.REVIEWED)

    @admin.action(description="Mark the selected issues as ignored", permissions=["change"])
    def mark_ignored(self, request, queryset):
        self._mark(request, queryset, Issue.Review.IGNORED)

    @admin.action(description="Re-open the selected issues", permissions=["change"])
    def mark_open(self, request, queryset):
        self._mark(request, queryset, Issue.Review.OPEN)


SKIPPED_SHOWN = timedelta(days=14)


class SkippedRunInline(admin.TabularInline):
    model = SkippedRun
    extra = 0
    can_delete = False
    readonly_fields = ["due_at", "reason", "detail", "created_at"]
    ordering = ["-created_at"]
    verbose_name_plural = f"skipped runs of the last {SKIPPED_SHOWN.days} days"

    def get_queryset(self, request):
        # An hourly site that keeps skipping holds thousands (kept 90 days): the site's page shows the recent.
        # Each row's title (SkippedRun.__str__) names its site: joined here, not read once a row.
        recent = super().get_queryset(request).filter(created_at__gte=timezone.now() - SKIPPED_SHOWN)
        return recent.select_related("site")

    def has_add_permission(self, request, obj=None):
        return False


# What made the site and was checked then; shown, never edited, in the admin.
SITE_FIXED = ("start_url", "owner", "allow_private")


class SiteAdminForm(CrawlSettingsForm, SiteScheduleForm):
    """The dashboard's schedule form (cron and quota checks included) with the crawl settings beside it.

    The crawl settings are the new-audit form's fields, bounds and pattern checks.
    The start URL, owner and private-target permission are not editable: they
    were checked (SSRF guard, quota) when an audit made the site, and a change
    here would retarget every later crawl past those checks.
    """

    class Meta(SiteScheduleForm.Meta):
        fields = "__all__"
        exclude = (*SITE_FIXED, "thresholds")  # edited as one field each, below

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, value in (self.instance.thresholds or {}).items():
            if name in self.fields:
                self.initial[name] = value

    def clean(self):
        data = super().clean()
        self.instance.thresholds = self.thresholds()
        return data


@admin.register(Site)
class SiteAdmin(PurgedDelete, admin.ModelAdmin):
    form = SiteAdminForm
    readonly_fields = SITE_FIXED
    list_display = ["start_url", "owner", "cadence", "paused", "time_zone", "created_at"]
    list_filter = ["cadence", "paused"]
    search_fields = ["start_url", "owner__username"]
    list_select_related = ["owner"]
    inlines = [SkippedRunInline]
    actions = ["delete_selected", "pause_schedules", "resume_schedules"]

    # A site is made by its first audit (the new-audit form's or the command's checks), never here.
    def has_add_permission(self, request):
        return False

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        schedules.saved(obj, form.changed_data)

    delete_later = staticmethod(delete_site_soon)
    related = (Audit, Page, Issue, Notification)

    def get_queryset(self, request):
        # One being deleted is gone at once, as on the dashboard (access.site_for_user).
        return super().get_queryset(request).filter(deleting=False)

    def delete_counts(self, objs):
        return {"audits": Audit.objects.filter(site__in=objs).count()}

    @admin.action(description="Pause the schedules of the selected sites", permissions=["change"])
    def pause_schedules(self, request, queryset):
        for site in queryset:
            site.pause()
            schedules.sync(site)
        self.message_user(request, f"Paused {queryset.count()} site(s).")

    @admin.action(description="Resume the schedules of the selected sites", permissions=["change"])
    def resume_schedules(self, request, queryset):
        resumed, over = 0, []
        for site in queryset:
            # The owner's limit on scheduled sites holds here as on the site's own page.
            if site.cadence and site.paused and schedules.scheduled_sites_left(site.owner, site) <= 0:
                over.append(site.start_url)
                continue
            site.resume()
            schedules.sync(site)
            resumed += 1
        self.message_user(request, f"Resumed {resumed} site(s).")
        if over:
            self.message_user(request, f"Not resumed, their owners schedule as many sites as allowed: "
                                       f"{', '.join(over)}.", level=messages.WARNING)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["audit", "event", "channel", "state", "reason", "detail", "created_at"]
    list_filter = ["event", "channel", "state"]
    list_select_related = ["audit"]  # Django's default, a bare select_related(), joins every relation's relations
    raw_id_fields = ["audit"]
    readonly_fields = ["audit", "event", "channel", "state", "reason", "detail", "created_at"]

    def has_add_permission(self, request):
        return False  # a record of what was sent: only the notifier writes one

    def get_queryset(self, request):
        return with_audit(super().get_queryset(request))


# --- django-q2's admin, for superusers only ---------------------------------------


class SuperuserOnly:
    """Hides a model admin from everyone but superusers, whatever their model permissions."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request, *args):
        return request.user.is_active and request.user.is_superuser and super().has_add_permission(request, *args)

    def has_change_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser and super().has_delete_permission(request, obj)


def _restrict_django_q_admin(site=admin.site):
    """Re-register every django_q model admin with the superuser-only checks mixed in."""
    import django_q.admin  # noqa: F401  (registers django-q2's admins before we wrap them)

    for model, model_admin in list(site._registry.items()):
        if model._meta.app_label != "django_q" or isinstance(model_admin, SuperuserOnly):
            continue
        restricted = type(f"SuperuserOnly{type(model_admin).__name__}", (SuperuserOnly, type(model_admin)), {})
        site.unregister(model)
        site.register(model, restricted)


_restrict_django_q_admin()
