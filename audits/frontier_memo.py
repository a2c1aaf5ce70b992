"""What this process already knows is in an audit's frontier, to skip asking again.

Every sub-batch offers the frontier a few thousand link targets, nearly all of
them pages and resources an earlier sub-batch queued (navigation, footers). The
frontier table is the deduplication set, so each offer used to be an
``IN (...)`` lookup of every distinct target: ~8% of a 10,000-page audit's
database thread (measured). Frontier rows are never deleted while an audit
crawls (finalize drops them at the end), so a hash once seen committed stays
true, and a target known here needs no lookup.

Two facts are remembered, because they answer different questions:

- ``linked``: the row exists and was reached through a link, so an offer of it
  changes nothing whatever its kind;
- ``present``: the row exists (say a resource, or a sitemap-only page), which
  settles a resource offer but not a page offer (that may need relinking).

Only committed rows are remembered (``remember`` runs after the transaction),
or a rolled-back sub-batch would hide its URLs from the crawl forever. Memory
is bounded: past ``CAP`` hashes an audit's memo stops growing and the lookup
simply runs for the rest, and only the most recent few audits are kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

# ~110 bytes a 32-character hash in a set: 50,000 is about 5.5 MB per audit.
CAP = 50_000
AUDITS = 4

_lock = threading.Lock()
# Keyed by (id, created_at): SQLite can hand a deleted audit's id to the next
# one, whose frontier is a different set.
_memos: OrderedDict[tuple, FrontierMemo] = OrderedDict()


class FrontierMemo:
    def __init__(self) -> None:
        self.linked: set[str] = set()
        self.present: set[str] = set()

    def settled(self, digest: str, is_page: bool) -> bool:
        """True when offering ``digest`` again would change nothing."""
        return digest in self.linked or (not is_page and digest in self.present)

    def remember(self, linked: list[str], present: list[str]) -> None:
        room = CAP - len(self.linked) - len(self.present)
        if room <= 0:
            return
        self.linked.update(linked[:room])
        room -= min(room, len(linked))
        self.present.update(present[:room])


def memo_for(audit) -> FrontierMemo:
    key = (audit.pk, audit.created_at)
    with _lock:
        memo = _memos.get(key)
        if memo is None:
            memo = _memos[key] = FrontierMemo()
            while len(_memos) > AUDITS:
                _memos.popitem(last=False)
        else:
            _memos.move_to_end(key)
        return memo
