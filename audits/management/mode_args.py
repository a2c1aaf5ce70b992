"""The ``audit`` command's crawl modes: ``--mode validate|delta --from AUDIT_ID|previous``."""

from __future__ import annotations

from django.core.management.base import CommandError

from ..models import Audit
from ..services import SourceGone, make_follow_up

PREVIOUS = "previous"


def add_mode_arguments(parser) -> None:
    parser.add_argument(
        "--mode", choices=list(Audit.Mode.values), default=Audit.Mode.FULL,
        help="full: crawl the site (the default). validate: re-fetch only the URLs that carried the --from "
             "audit's issues (ignored ones left out) and say of each issue whether it is fixed, still there "
             "or unknown. delta: a full crawl that asks the site whether each page of the --from audit "
             "changed (If-None-Match / If-Modified-Since) and reuses the unchanged ones without parsing")
    parser.add_argument(
        "--from", dest="source", metavar="AUDIT_ID|previous",
        help="The completed audit of the same site a validate or delta run starts from; 'previous' is the "
             "site's last completed audit")
    parser.add_argument(
        "--allow-unknown", action="store_true",
        help="With --mode validate: pass the issues whose re-check could not run (unknown verdicts: the URL "
             "not fetched or not read as a page, robots.txt now refusing it, ...). Without it --fail-on counts "
             "them as not fixed, but for the checks across the whole site, which a validation never re-runs "
             "(the README lists them)")


def source_from_options(opts, owner, start_url: str) -> Audit | None:
    """The audit --from names, checked against --mode; None for a full crawl. Exits 2 when it cannot be used.

    A delta from 'previous' on a site's first run is a full crawl (``first_delta``): a pipeline that
    runs the same command every night works from the first night, as --fail-on-new does.
    """
    mode, given = opts["mode"], opts["source"]
    if opts.get("allow_unknown") and mode != Audit.Mode.VALIDATE:
        raise CommandError("--allow-unknown needs --mode validate: only a validation has unknown verdicts",
                           returncode=2)
    if mode == Audit.Mode.FULL:
        if given:
            raise CommandError("--from needs --mode validate or --mode delta", returncode=2)
        return None
    if not given:
        raise CommandError(f"--mode {mode} needs --from AUDIT_ID or --from {PREVIOUS}", returncode=2)
    if opts.get("threshold") and mode == Audit.Mode.VALIDATE:
        raise CommandError("--threshold cannot be given with --mode validate: a validation judges by the "
                           "thresholds of the audit it re-checks", returncode=2)

    if given == PREVIOUS:
        source = Audit.comparable().filter(owner=owner, site__start_url=start_url).order_by("-pk").first()
        if source is None and mode != Audit.Mode.DELTA:
            raise CommandError(f"--from {PREVIOUS}: no completed audit of {start_url} to start from", returncode=2)
        return source
    return earlier_audit("--from", given, owner, start_url, "started from")


def first_delta(opts, source: Audit | None) -> bool:
    """A delta from 'previous' that found nothing to start from: it crawls in full."""
    return opts["mode"] == Audit.Mode.DELTA and source is None


def earlier_audit(flag: str, given: str, owner, start_url: str, use: str) -> Audit:
    """The completed audit of the same owner and site that ``flag`` names by id; exits 2 with why not."""
    # isdigit() alone accepts "²" and other digits int() refuses: ASCII digits only.
    if not (given.isascii() and given.isdigit()):
        raise CommandError(f"{flag}: expected an audit id or '{PREVIOUS}', not {given!r}", returncode=2)
    audit = Audit.objects.select_related("site").filter(pk=int(given)).first()
    problem = None
    if audit is None:
        problem = f"there is no audit {given}"
    elif audit.owner_id != owner.pk:
        problem = f"audit {audit.pk} belongs to another user, not {owner.get_username()!r} (see --owner)"
    elif audit.site.start_url != start_url:
        problem = f"audit {audit.pk} is of {audit.site.start_url}, not {start_url}; only audits of the same site " \
                  f"can be {use}"
    elif audit.status != Audit.Status.COMPLETED:
        problem = f"audit {audit.pk} is {audit.status}; only a completed audit can be {use}"
    elif audit.deleting:
        problem = f"audit {audit.pk} is being deleted"
    elif audit.mode == Audit.Mode.VALIDATE:
        # A validation holds only what it re-checked: its source's other issues would drop out of the next.
        problem = f"audit {audit.pk} is a validation; only a full or delta audit can be {use}"
    if problem:
        raise CommandError(f"{flag}: {problem}", returncode=2)
    return audit


def apply_mode(audit: Audit, opts, source: Audit | None) -> None:
    """Make the new ``audit`` a validation or delta run of ``source``, when the options named one."""
    if source is not None:
        try:
            make_follow_up(audit, source, opts["mode"])
        except SourceGone as exc:  # deleted since it was looked up
            audit.delete()
            raise CommandError(f"--from: {exc}", returncode=2) from None
