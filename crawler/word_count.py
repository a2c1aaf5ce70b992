"""How many words a page's visible text holds, whether its script puts spaces between words or not.

Chinese and Japanese count one word per ideograph or kana character, as common
word counters (Microsoft Word's among them) do. Thai, Lao, Khmer and Myanmar
put spaces between phrases, not words, and splitting their words needs a
dictionary, so a run of their letters counts one word per
``SYLLABIC_CHARS_PER_WORD`` code points. A token with none of these characters
counts one word, as it always has.
"""

from __future__ import annotations

import re

# About the mean length of a Thai word in code points, combining vowel and tone
# marks included (4.5 to 5.5 in sentences segmented by hand): an estimate, not a segmentation.
SYLLABIC_CHARS_PER_WORD = 5

_IDEOGRAPHIC = (
    "\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_SYLLABIC = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_IDEOGRAPH = re.compile(f"[{_IDEOGRAPHIC}]")
_SYLLABIC_RUN = re.compile(f"[{_SYLLABIC}]+")
_NO_SPACE_RUN = re.compile(f"[{_IDEOGRAPHIC}{_SYLLABIC}]+")
_NO_SPACE_CHAR = re.compile(f"[{_IDEOGRAPHIC}{_SYLLABIC}]")  # the test every page takes: one char, no run
# A whitespace-separated token holding one of those characters; the lookbehind
# starts a match only at a token's start, so the scan is linear in the text.
_MIXED_TOKEN = re.compile(rf"(?<!\S)[^\s{_IDEOGRAPHIC}{_SYLLABIC}]*+[{_IDEOGRAPHIC}{_SYLLABIC}]\S*+")
_WORD_CHAR = re.compile(r"\w")


def count_words(text: str, words: list[str]) -> int:
    """The words of ``text``, whose whitespace-separated tokens are ``words``."""
    if text.isascii() or not _NO_SPACE_CHAR.search(text):
        return len(words)
    count = len(words)
    for token in _MIXED_TOKEN.findall(text):
        count -= 1
        count += len(_IDEOGRAPH.findall(token))
        for run in _SYLLABIC_RUN.findall(token):
            count += -(-len(run) // SYLLABIC_CHARS_PER_WORD)
        # Latin words and digits between those characters ("iPhone" in Chinese
        # text) count one each; punctuation such as "。" counts nothing.
        for piece in _NO_SPACE_RUN.split(token):
            if piece and _WORD_CHAR.search(piece):
                count += 1
    return count

