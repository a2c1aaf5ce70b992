"""Settings for a qcluster whose workers are replaced after every task (django-q2's recycle)."""

from config.settings import *  # noqa: F403

Q_CLUSTER = {**Q_CLUSTER, "recycle": 1}  # noqa: F405
