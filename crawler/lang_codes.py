"""Which language, script and region subtags an hreflang or ``<html lang>`` code may use.

Google reads hreflang as an ISO 639-1 language, optionally an ISO 15924 script,
and an ISO 3166-1 alpha-2 region: "en-UK" has the right shape but no such
region (the United Kingdom is GB), and search engines ignore the tag. The
tables are Debian's iso-codes 4.15.0 (``/usr/share/iso-codes/json``), copied
here so the crawler reads no system files; a three-letter language (ISO 639-2/3,
thousands of them) and a UN M.49 numeric region ("es-419") are taken on shape alone.
"""

from __future__ import annotations

import re

# ISO 639-1: the two-letter languages (iso_639-2.json's alpha_2 column).
LANGUAGES = frozenset("""
    aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de
    dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id
    ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu
    lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu
    rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr
    ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
""".split())

# ISO 15924: the four-letter scripts, as written (Latn, Hans).
SCRIPTS = frozenset("""
    Adlm Afak Aghb Ahom Arab Aran Armi Armn Avst Bali Bamu Bass Batk Beng Bhks Blis Bopo Brah Brai Bugi
    Buhd Cakm Cans Cari Cham Cher Cirt Copt Cprt Cyrl Cyrs Deva Dsrt Dupl Egyd Egyh Egyp Elba Ethi Geok
    Geor Glag Goth Gran Grek Gujr Guru Hanb Hang Hani Hano Hans Hant Hatr Hebr Hira Hluw Hmng Hrkt Hung
    Inds Ital Jamo Java Jpan Jurc Kali Kana Khar Khmr Khoj Kitl Kits Knda Kore Kpel Kthi Lana Laoo Latf
    Latg Latn Leke Lepc Limb Lina Linb Lisu Loma Lyci Lydi Mahj Mand Mani Marc Maya Mend Merc Mero Mlym
    Modi Mong Moon Mroo Mtei Mult Mymr Narb Nbat Newa Nkgb Nkoo Nshu Ogam Olck Orkh Orya Osge Osma Palm
    Pauc Perm Phag Phli Phlp Phlv Phnx Piqd Plrd Prti Qaaa Qabx Rjng Roro Runr Samr Sara Sarb Saur Sgnw
    Shaw Shrd Sidd Sind Sinh Sora Sund Sylo Syrc Syre Syrj Syrn Tagb Takr Tale Talu Taml Tang Tavt Telu
    Teng Tfng Tglg Thaa Thai Tibt Tirh Ugar Vaii Visp Wara Wole Xpeo Xsux Yiii Zinh Zmth Zsye Zsym Zxxx
    Zyyy Zzzz
""".split())

# ISO 3166-1 alpha-2: the countries and territories.
REGIONS = frozenset("""
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT
    BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH
    ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT
    HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS
    LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI
    NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG
    SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG
    UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW
""".split())

_SHAPE = re.compile(r"([a-z]{2,3})(?:-([a-z]{4}))?(?:-([a-z]{2}|[0-9]{3}))?", re.I)
_SCRIPTS = frozenset(script.lower() for script in SCRIPTS)


def lang_code_problem(code: str) -> str | None:
    """Why ``code`` is no language code hreflang or ``<html lang>`` can use, or None when it is one."""
    match = _SHAPE.fullmatch(code.strip())
    if match is None:
        return "not a language code (language, then optional script and region, joined by -)"
    language, script, region = match.groups()
    if len(language) == 2 and language.lower() not in LANGUAGES:
        return f"{language} is no ISO 639-1 language"
    if script is not None and script.lower() not in _SCRIPTS:
        return f"{script} is no ISO 15924 script"
    if region is not None and not region.isdigit() and region.upper() not in REGIONS:
        hint = "; the United Kingdom is GB" if region.upper() == "UK" else ""
        return f"{region} is no ISO 3166-1 region{hint}"
    return None
