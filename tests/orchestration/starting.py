"""An audit of a loopback site taken through start, ready for its chunks to be run by hand."""

from audits.crawl.start import run_start
from audits.dispatch import InlineDispatcher
from audits.models import Audit
from tests.factories import make_audit


def started(owner, site, **fields) -> tuple[Audit, InlineDispatcher]:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, **fields)
    dispatcher = InlineDispatcher()
    run_start(audit.pk, dispatcher)
    audit.refresh_from_db()
    assert audit.phase == Audit.Phase.CRAWLING, (audit.error_code, audit.error_detail)
    return audit, dispatcher
