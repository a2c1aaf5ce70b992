"""A start-up check that refuses a django-q2 configuration that re-runs tasks.

django-q2 only warns when ``retry`` is not larger than ``timeout`` (and not at all
when they are equal). With the ORM broker a task becomes visible again ``retry``
seconds after it was taken, so ``retry <= timeout`` means a slow chunk is handed
to a second worker while the first is still crawling it.
"""

import os

from django.conf import settings
from django.core.checks import Error, Warning, register

from crawler.fetch import FetchPolicy

# The tag of the checks the `audit` command runs for --enqueue (it skips the rest).
CLUSTER_CHECKS = "siteward_cluster"


@register(CLUSTER_CHECKS)
def check_q_cluster_timing(app_configs=None, **kwargs):
    conf = getattr(settings, "Q_CLUSTER", {})
    timeout, retry = conf.get("timeout"), conf.get("retry")
    if not timeout:
        return [Error(
            "Q_CLUSTER has no timeout, so a hung crawl chunk would hold a worker forever.",
            hint="Set Q_CLUSTER['timeout'] (Q_TIMEOUT) to a few minutes, below 'retry'.",
            id="siteward.E001",
        )]
    if retry is None or retry <= timeout:
        return [Error(
            f"Q_CLUSTER retry ({retry}) must be larger than timeout ({timeout}): otherwise a task "
            "still running is delivered to a second worker.",
            hint="Set Q_RETRY well above Q_TIMEOUT (e.g. timeout 300, retry 420).",
            id="siteward.E002",
        )]
    deadline = settings.SITEWARD.get("CHUNK_SOFT_DEADLINE", 0)
    if deadline >= timeout:
        return [Error(
            f"The chunk soft deadline ({deadline}s) must be below Q_CLUSTER timeout ({timeout}s), "
            "or every long chunk is killed instead of ending cleanly.",
            hint="Lower SITEWARD_CHUNK_SECONDS or raise Q_TIMEOUT.",
            id="siteward.E003",
        )]
    # Besides its soft deadline a chunk's task may read robots.txt again before it starts, and waits
    # for the requests in flight after it, each up to a fetch's whole budget.
    budget = FetchPolicy().total_budget
    longest = deadline + 2 * budget
    if longest >= timeout:
        return [Warning(
            f"A chunk's task may run {longest:g}s (a robots.txt read before it, its {deadline:g}s soft deadline, "
            f"and its last requests after it, each up to {budget:g}s), not less than "
            f"Q_CLUSTER timeout ({timeout}s): "
            "a chunk whose last requests hang is killed, and retried, instead of ending cleanly.",
            hint="Raise Q_TIMEOUT (and Q_RETRY above it) or lower SITEWARD_CHUNK_SECONDS.",
            id="siteward.W005",
        )]
    return []


@register(CLUSTER_CHECKS)
def check_queue_name(app_configs=None, **kwargs):
    """Q_CLUSTER_NAME picks the queue a cluster serves: a name no task is ever sent to would idle it forever."""
    name = os.environ.get("Q_CLUSTER_NAME", "")
    known = {settings.Q_CLUSTER.get("name"), *settings.Q_CLUSTER.get("ALT_CLUSTERS", {})}
    if name and name not in known:
        return [Error(
            f"Q_CLUSTER_NAME={name!r} is not a queue Siteward sends tasks to, so this cluster would never run one.",
            hint="Leave Q_CLUSTER_NAME unset for the crawl queue, or set it to 'render' for rendered audits; "
                 "the shared name that signs tasks (formerly Q_CLUSTER_NAME) is SITEWARD_Q_PREFIX.",
            id="siteward.E004",
        )]
    return []
