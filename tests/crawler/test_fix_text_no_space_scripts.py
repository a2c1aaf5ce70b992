"""Word counts of scripts written without spaces between words (Chinese,
Japanese, Thai), which made every such page ``thin_content``, and of
space-separated text, which must count exactly as before."""

from __future__ import annotations

import random
import time

import pytest

from crawler.parse import build_tree, parse_html
from crawler.word_count import count_words
from tests.crawler.readers import READERS, URL, deep, page_findings

CHINESE = "这是一篇关于网站审核的文章，内容丰富。"  # 17 ideographs, 2 punctuation marks
JAPANESE = "これは検索エンジンの記事です。"  # 14 kana and kanji, 1 full stop
THAI = "บทความภาษาไทย"  # one run of 13 code points


def page(text: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>{text}</p></body></html>".encode()


def test_the_event_path_is_what_deep_pages_take():
    assert build_tree(deep(page(CHINESE))) is None
    assert build_tree(page(CHINESE)) is not None


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CHINESE * 20, 17 * 20),
        (JAPANESE * 20, 14 * 20),
        ("日本語と English が混ざった文", 4 + 1 + 6),  # each kana/kanji, and the English word
        ("我的iPhone很好。", 5),  # 我 的 iPhone 很 好; "。" is no word
        ("カタカナ・ひらがな", 9),
        (THAI, 3),  # 13 code points, five to a word, rounded up
        (f"{THAI} {THAI} ไทย", 3 + 3 + 1),  # runs between spaces are counted apart
        ("漢字𠀋𠀌 extension B", 4 + 2),  # ideographs outside the BMP count too
    ],
)
def test_ideographs_and_kana_count_one_word_each_and_thai_runs_by_length(reader, text, expected):
    assert READERS[reader](page(text)).word_count == expected


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    "text",
    [
        "Plain English text, with punctuation — and “curly quotes” ’tis.",
        "Café crème brûlée à la française, s'il vous plaît.",
        "한국어는 단어 사이에 띄어쓰기를 합니다",  # Korean writes spaces between words
        "हिन्दी में शब्दों के बीच रिक्त स्थान होते हैं",  # Devanagari: a lead byte the prefilter shares with Thai
        "Tiếng Việt có dấu cách giữa các từ",  # Vietnamese: a lead byte it shares with Khmer
        "Ελληνικά και русский язык ¶ © 2024 🙂",
    ],
)
def test_space_separated_text_counts_its_whitespace_tokens_as_before(reader, text):
    assert READERS[reader](page(text)).word_count == len(text.split())


@pytest.mark.parametrize("reader", READERS)
def test_legacy_encodings_count_like_utf8(reader):
    expected = READERS[reader](page(JAPANESE * 20)).word_count
    html = page(JAPANESE * 20).decode()
    assert READERS[reader](html.encode("shift_jis"), "shift_jis").word_count == expected
    thai = page(THAI * 10)
    assert READERS[reader](thai.decode().encode("tis-620"), "tis-620").word_count == 26


def test_the_content_hash_still_reads_whitespace_tokens():
    # Duplicate detection must not change with the count: same tokens, same hash.
    a = parse_html(page(CHINESE * 20), URL)
    b = parse_html(page(" ".join([CHINESE] * 20)), URL)
    assert a.content_hash != b.content_hash
    assert a.content_hash == parse_html(page(CHINESE * 20) + b"<!-- x -->", URL).content_hash


@pytest.mark.parametrize("text", [CHINESE * 15, JAPANESE * 15, "ภาษาไทยเป็นภาษาที่ไม่เว้นวรรคระหว่างคำ " * 30])
def test_a_long_article_in_a_no_space_script_is_not_thin_content(text):
    body = page(text)
    codes = [f.code for f in page_findings(body)]
    assert "thin_content" not in codes
    short = page(CHINESE * 5)
    assert "thin_content" in [f.code for f in page_findings(short)]


def test_a_text_counts_the_sum_of_its_tokens():
    pool = ["audit", "naïve", "“quoted”", "—", CHINESE, JAPANESE, THAI, "我的iPhone很好。", "ไทย123",
            "ＡＢＣ漢字", "。", "한국어", "Tiếng"]
    rng = random.Random(7)
    for _ in range(200):
        tokens = [rng.choice(pool) for _ in range(rng.randint(1, 12))]
        text = "".join(token + rng.choice([" ", "\n", "\u3000", "  "]) for token in tokens)
        assert count_words(text, text.split()) == sum(count_words(t, [t]) for t in tokens)


def test_a_large_page_with_a_few_cjk_characters_is_counted_in_linear_time():
    text = "word " * 400_000 + "中文 " + "x" * 2_000_000 + " 日本x" * 1000
    started = time.perf_counter()
    assert count_words(text, text.split()) == 400_000 + 2 + 1 + 3 * 1000
    assert time.perf_counter() - started < 1.0
