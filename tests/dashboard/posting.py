"""Form posts that race: the same person submitting from many browsers at once, or many people from one address."""

import threading

from django.db import connection
from django.test import Client


def post_at_once(user, data: list[dict], url: str) -> list[int]:
    """POST each of ``data`` to ``url`` as ``user``, all at once from threads of their own; the statuses, sorted.

    ``user``: one person for every post, or a list of people, one a post.
    """
    users = user if isinstance(user, list) else [user] * len(data)
    clients = []
    for person in users:
        client = Client()
        client.force_login(person)
        clients.append(client)
    barrier = threading.Barrier(len(data))
    statuses = []

    def submit(client, form):
        try:
            barrier.wait(timeout=10)
            statuses.append(client.post(url, form).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=pair) for pair in zip(clients, data, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return sorted(statuses)
