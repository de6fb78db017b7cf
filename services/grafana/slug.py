"""Slugs as Grafana forms them from titles (url `/d/<uid>/<slug>`, uri `db/<slug>`).

Written from the behaviour described in spec/search.md §1.5: lower-case, transliterate a
fixed table of letters, turn separators into one `-`, hex-encode everything else, and fall
back to a UUID v5 of the title when the result is empty or longer than 50 characters.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import uuid

_SEPARATORS = set(" ,\"'?./()%-_\n\r\x00")
_DASHES = re.compile(r"-{2,}")


def _build_table() -> dict[str, str]:
    table: dict[str, str] = {
        "&": "and", "@": "at", "©": "c", "®": "r", "™": "tm", "ß": "ss", "æ": "ae",
        "œ": "oe", "ü": "ue", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i",
    }
    groups = {
        "a": "àáâäåāăąãả", "c": "çćčĉċ", "e": "èéêëēęěėẽẻ", "i": "ìíîïīįĩỉ",
        "o": "òóôõöøőōỏơ", "u": "ùúûůűūųũủư", "y": "ýÿỳỹỷỵŷ", "s": "śšşș", "z": "źżž",
        "n": "ńň", "g": "ğ", "r": "řŕ", "t": "ťţț", "d": "ď", "l": "ĺľ",
    }
    for base, letters in groups.items():
        for letter in letters:
            table.setdefault(letter, base)
    # Vietnamese: every vowel (plain, breve, circumflex, horn) with each of the five tones
    for vowel in "aăâeêioôơuưy":
        base = unicodedata.normalize("NFD", vowel)[0]
        for tone in ("\u0300", "\u0301", "\u0303", "\u0309", "\u0323"):
            letter = unicodedata.normalize("NFC", vowel + tone)
            if len(letter) == 1:
                table.setdefault(letter, base)
    cyrillic = {
        "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "yo", "ж": "zh",
        "з": "z", "и": "i", "й": "j", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
        "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "h", "ц": "c",
        "ч": "ch", "ш": "sh", "щ": "sch", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "ju",
        "я": "ja", "є": "je", "і": "i", "ї": "ji", "ґ": "g",
    }
    table.update(cyrillic)
    hebrew = {
        "א": "a", "ב": "b", "ג": "g", "ד": "d", "ה": "h", "ו": "v", "ז": "z", "ח": "ch",
        "ט": "t", "י": "y", "כ": "k", "ך": "k", "ל": "l", "מ": "m", "ם": "m", "נ": "n",
        "ן": "n", "ס": "s", "ע": "a", "פ": "p", "ף": "f", "צ": "ts", "ץ": "ts", "ק": "k",
        "ר": "r", "ש": "sh", "ת": "t",
    }
    table.update(hebrew)
    return table


_TABLE = _build_table()


@functools.lru_cache(maxsize=8192)
def slugify(title: str) -> str:
    out: list[str] = []
    for ch in title.strip().lower():
        if "a" <= ch <= "z" or "0" <= ch <= "9":
            out.append(ch)
        elif ch in _SEPARATORS:
            out.append("-")
        elif ch in _TABLE:
            out.append(_TABLE[ch])
        else:
            out.append("-" + ch.encode("utf-8").hex() + "-")
    slug = _DASHES.sub("-", "".join(out)).strip("-")
    if not slug or len(slug) > 50:
        return str(uuid.uuid5(uuid.NAMESPACE_OID, title))
    return slug
