"""The HTTP layers probe: its floor layer must finish each answer before reusing a connection."""

from benchmarks.corpus import build_corpus, page_path
from benchmarks.http_layers import _run
from benchmarks.static_server import python_server
from crawler.loop import run


def test_the_protocol_floor_reads_every_get_body_to_its_end_on_kept_alive_connections():
    corpus = build_corpus(12, seed=7)  # pages of ~40 KB: several reads each
    paths = [page_path(i) for i in range(12)]
    with python_server(corpus) as (base, _):
        # _run exits unless every answer was a 200: a body left unread would be
        # taken for the next answer's head on the same connection.
        result = run(_run(base, paths, "protocol", "GET", requests=120, concurrency=3))
    assert result["requests"] == 120
    assert result["requests_per_second"] > 0


def test_the_protocol_floor_takes_a_head_answer_without_a_body():
    corpus = build_corpus(12, seed=7)
    with python_server(corpus) as (base, _):
        result = run(_run(base, [page_path(i) for i in range(12)], "protocol", "HEAD", requests=60, concurrency=2))
    assert result["method"] == "HEAD" and result["requests"] == 60
