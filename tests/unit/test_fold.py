"""Decoding and folding: each reading an attacker could rely on to hide an address from a literal match."""

from __future__ import annotations

import base64
import unicodedata
from urllib.parse import quote

import pytest

from bouncerd.core import decoders, fold, tokens

ADDRESS = "attacker@evil.com"


def keys(text: str) -> set[str]:
    return tokens.text_keys(text)


# ---- folding ---------------------------------------------------------------------------------------


def test_case_is_folded() -> None:
    assert ADDRESS in keys("Write to ATTACKER@Evil.COM today")


def test_whitespace_variants_separate_tokens_and_vanish_at_the_edges() -> None:
    assert ADDRESS in keys("to:\u00a0attacker@evil.com\u2003and\tmore")
    assert fold.fold("\u00a0Attacker@Evil.com\u2002") == "\u0020attacker@evil.com\u0020"


def test_fullwidth_forms_fold_through_nfkd() -> None:
    assert ADDRESS in keys("ａｔｔａｃｋｅｒ＠ｅｖｉｌ．ｃｏｍ")


def test_mathematical_alphanumerics_fold_to_ascii() -> None:
    assert ADDRESS in keys("𝐚𝐭𝐭𝐚𝐜𝐤𝐞𝐫@𝐞𝐯𝐢𝐥.𝐜𝐨𝐦")


def test_zero_width_characters_are_removed() -> None:
    assert ADDRESS in keys("att\u200backer@ev\u200cil\u200d.c\u2060om\ufeff")


def test_bidi_controls_are_removed() -> None:
    assert ADDRESS in keys("\u202eattacker@evil.com\u202c \u2066x\u2069")


def test_soft_hyphen_and_combining_marks_are_removed() -> None:
    assert ADDRESS in keys("atta\u00adcker@e\u0301vil.com")


def test_ascii_control_characters_are_removed() -> None:
    assert ADDRESS in keys("att\x00ack\x1ber@evil.com")


def test_every_format_control_character_is_invisible_to_matching() -> None:
    hidden = [chr(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cf"]
    assert fold.fold("a" + "".join(hidden) + "b") == "ab"


@pytest.mark.parametrize(
    ("lookalike", "latin"),
    [
        ("аttаckеr@еvil.com", ADDRESS),  # Cyrillic а, е
        ("attacker@evіl.com", ADDRESS),  # Cyrillic і
        ("ΑTTΑCKΕR@ΕVIL.COM", ADDRESS),  # Greek capitals
        ("attacker@evil。com", ADDRESS),  # ideographic full stop
        ("ɑttɑcker@evil.com", ADDRESS),  # Latin alpha
    ],
)
def test_confusable_lookalikes_fold_to_their_latin_skeleton(lookalike: str, latin: str) -> None:
    assert latin in keys(lookalike)


def test_confusable_table_maps_only_to_ascii() -> None:
    assert all(v.isascii() and len(v) == 1 for v in fold.CONFUSABLES.values())


def test_punycode_labels_decode_and_fold_like_their_unicode_form() -> None:
    assert fold.fold("xn--80ak6aa92e.com") == fold.fold("аррӏе.com") == "apple.com"


def test_invalid_punycode_is_left_as_written() -> None:
    assert fold.fold("xn--99999999999.com") == "xn--99999999999.com"


# ---- decoders --------------------------------------------------------------------------------------


def test_percent_encoding_is_decoded() -> None:
    assert ADDRESS in keys("attacker%40evil%2Ecom")


def test_percent_u_encoding_is_decoded() -> None:
    assert ADDRESS in keys("attacker%u0040evil.com")


def test_html_entities_are_decoded() -> None:
    assert ADDRESS in keys("attacker&#64;evil&#x2e;com")
    assert ADDRESS in keys("attacker&commat;evil&period;com")


def test_json_string_escapes_are_decoded() -> None:
    assert ADDRESS in keys("attacker\\u0040evil\\u002ecom")
    assert ADDRESS in keys("attacker\\x40evil.com")
    assert ADDRESS in keys("attacker\\u{40}evil.com")


def test_json_surrogate_pair_escapes_are_joined() -> None:
    assert decoders.decode_inline("\\ud835\\udc1a") == "𝐚"


def test_quoted_printable_is_decoded() -> None:
    assert ADDRESS in keys("attacker=40evil.com")
    assert ADDRESS in keys("attac=\nker@evil.com")  # soft line break


def test_quoted_printable_leaves_lowercase_lookalikes_alone() -> None:
    assert decoders.decode_qp("see ?ref=account =40") == "see ?ref=account @"


def test_mime_encoded_word_base64_is_decoded() -> None:
    word = "=?utf-8?b?" + base64.b64encode(ADDRESS.encode()).decode() + "?="
    assert ADDRESS in keys(f"From: {word}")


def test_mime_encoded_word_q_is_decoded() -> None:
    assert ADDRESS in keys("=?UTF-8?Q?attacker=40evil.com?=")


def test_adjacent_mime_encoded_words_are_joined() -> None:
    assert ADDRESS in keys("=?utf-8?q?attacker?= =?utf-8?q?=40evil.com?=")


def test_base64_run_that_decodes_to_text_is_read() -> None:
    blob = base64.b64encode(b"please send it all to attacker@evil.com").decode()
    assert ADDRESS in keys(f"attachment: {blob}")


def test_base64url_run_is_read() -> None:
    blob = base64.urlsafe_b64encode(b"send to attacker@evil.com ~~~ ???").decode()
    assert "-" in blob or "_" in blob
    assert ADDRESS in keys(blob)


def test_line_wrapped_base64_is_joined() -> None:
    blob = base64.b64encode(b"Reply to attacker@evil.com with the quarterly numbers").decode()
    wrapped = "\n".join(blob[i : i + 20] for i in range(0, len(blob), 20))
    assert ADDRESS in keys(wrapped)


def test_base64_glued_to_a_word_is_read_at_any_offset() -> None:
    blob = base64.b64encode(b"mail attacker@evil.com").decode()
    assert ADDRESS in keys("data" + blob)


def test_base64_of_binary_is_not_read_as_text() -> None:
    blob = base64.b64encode(bytes(range(256))).decode()
    assert decoders.decode_base64_text(blob) is None


def test_nested_encodings_are_decoded_in_rounds() -> None:
    inner = quote("write to attacker@evil.com", safe="")
    assert ADDRESS in keys(base64.b64encode(inner.encode()).decode())


def test_nesting_deeper_than_the_round_bound_is_not_decoded() -> None:
    text = "mail attacker@evil.com"
    for _ in range(fold.MAX_DECODE_ROUNDS + 1):
        text = base64.b64encode(text.encode()).decode()
    assert ADDRESS not in keys(text)
    shallow = "mail attacker@evil.com"
    for _ in range(fold.MAX_DECODE_ROUNDS):
        shallow = base64.b64encode(shallow.encode()).decode()
    assert ADDRESS in keys(shallow)


def test_decoded_readings_are_bounded_by_the_expansion_budget() -> None:
    text = "%41" * 10_000 + " " + base64.b64encode(b"x" * 3000).decode()
    total = sum(len(v) for v in fold.views(text))
    assert total <= (len(text) * (fold.MAX_EXPANSION + 1) + fold.EXPANSION_SLACK) * 2


# ---- assembled spellings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelled",
    [
        "attacker at evil dot com",
        "attacker AT evil DOT com",
        "attacker [at] evil [dot] com",
        "attacker(at)evil(dot)com",
        "attacker{at}evil{dot}com",
        "attacker [@] evil [.] com",
        "attacker[@]evil[.]com",
        "attacker @ evil . com",
        "attacker at evil.com",
        "attacker at evil[.]com",
    ],
)
def test_assembled_spellings_of_an_address_are_read(spelled: str) -> None:
    assert ADDRESS in keys(f"Please write to {spelled} before noon.")


def test_defanged_url_is_read() -> None:
    found = keys("grab hxxps[:]//evil[.]com/drop now")
    assert {"evil.com", "evil.com/drop"} <= found


def test_ordinary_prose_with_at_is_not_an_address() -> None:
    assert keys("We met at noon and looked at the report.") == set()
