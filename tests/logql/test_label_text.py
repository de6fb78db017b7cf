"""A stream's stored identity (`canonical_labels`) read back as labels and as the JSON /series
sends: exact for any label set, the tricky characters of the text form drawn often."""

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from logql.model import canonical_json, canonical_labels, labels_json, parse_canonical

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
# the characters that separate pairs in the text form, escapes, and anything else
TRICKY = st.sampled_from(['"', "=", ",", " ", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "x"])
VALUES = st.lists(st.one_of(TRICKY, st.characters(blacklist_categories=("Cs",))),
                  max_size=8).map("".join)
LABELS = st.dictionaries(NAMES, VALUES, max_size=5)


@given(LABELS)
@settings(max_examples=400, deadline=None)
def test_label_text_round_trips_and_prints_as_msgspec_json(labels):
    text = canonical_labels(labels)
    assert parse_canonical(text) == labels
    ordered = dict(sorted(labels.items()))
    assert canonical_json(text) == msgspec.json.encode(ordered).decode()
    assert labels_json(ordered) == msgspec.json.encode(ordered).decode()


def test_values_that_look_like_separators():
    for labels in [{"a": "", "b": "x"}, {"a": ", x", "b": "y"}, {"a": "x=", "b": "y"},
                   {"a": '", b="c'}, {"a": "="}, {}]:
        text = canonical_labels(labels)
        assert parse_canonical(text) == labels
        assert canonical_json(text) == msgspec.json.encode(dict(sorted(labels.items()))).decode()
