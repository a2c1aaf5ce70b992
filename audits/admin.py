from django.contrib import admin

from .models import Audit, Issue, Page


@admin.register(Audit)
class AuditAdmin(admin.ModelAdmin):
    list_display = ["id", "start_url", "owner", "status", "phase", "pages_crawled", "issues_critical",
                    "error_code", "created_at"]
    list_filter = ["status", "error_code", "created_at"]
    search_fields = ["start_url", "origin", "owner__username"]
    list_select_related = ["owner"]
    readonly_fields = ["status", "phase", "error_code", "error_detail", "failed_phase", "origin",
                       "pages_crawled", "pages_discovered", "pages_failed", "issues_critical",
                       "issues_warning", "issues_notice", "created_at", "started_at", "finished_at",
                       "heartbeat_at", "robots_status", "robots_http_status", "sitemap_found"]
    exclude = ["robots_body"]


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ["url", "audit", "kind", "status_code", "depth", "fetch_error", "ttfb_ms"]
    list_filter = ["kind", "status_code", "depth", "fetch_error"]
    search_fields = ["url", "title"]
    list_select_related = ["audit"]
    raw_id_fields = ["audit"]


@admin.register(Issue)
class IssueAdmin(admin.ModelAdmin):
    list_display = ["code", "severity", "url", "target_url", "audit", "review"]
    list_filter = ["severity", "code", "review", "audit"]
    search_fields = ["url", "target_url", "message"]
    list_select_related = ["audit"]
    raw_id_fields = ["audit", "page"]
