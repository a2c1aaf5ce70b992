"""content_hash lowers a page's text with a shortcut for mostly-ASCII text; the hash must not change."""

from __future__ import annotations

import hashlib
import random

import pytest

from crawler.content_hash import content_hash, lower_utf8

# Capital sigma (lowered by context), dotted capital I (lowers to two characters),
# sharp s, titlecase digraphs, ligatures, astral characters, a no-break space.
ODD = list("ΣσςİıßǅǈﬁЖжÉé©\xa0—’") + ["\U0001F600", "\U00010400"]


def _texts(seed: int):
    rng = random.Random(seed)
    for _ in range(3000):  # dense: non-ASCII anywhere
        yield "".join(rng.choices(ODD + list("aAzZ 0"), k=rng.randint(0, 400)))
    for _ in range(3000):  # sparse: long ASCII text with a few characters beyond it, as most pages
        chars = rng.choices("aAzZ 0", k=rng.randint(0, 4000))
        for _ in range(rng.randint(0, 4)):
            chars.insert(rng.randint(0, len(chars)), rng.choice(ODD))
        yield "".join(chars)


def test_the_shortcut_lowers_exactly_as_str_lower_does():
    for text in _texts(seed=1204):
        assert lower_utf8(text) == text.lower().encode(), text[:80]


@pytest.mark.parametrize("text", [
    "Hello World © 2026",
    "x" * 5000 + "ΑΣ" + "y" * 5000,  # a capital sigma after a letter becomes a final sigma
    "İSTANBUL " * 300,
    "Straße GRÜN",
    "word\xa0word",
])
def test_the_hash_is_the_hash_of_the_lowered_text(text):
    words = text.split()
    expected = hashlib.blake2b(" ".join(words).lower().encode(), digest_size=16).hexdigest()
    assert content_hash(words) == expected
