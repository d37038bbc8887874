"""sparse_adapt.json (sparse_adapt/modeling/settings.py) is edited by hand: each field of a
wrong type is refused in one line naming the file and the field, not later in tokenization."""

from __future__ import annotations

import json
import re

import pytest

from sparse_adapt.errors import ModelLoadError
from sparse_adapt.modeling.settings import SETTINGS_FILE, SpladeSettings


def test_a_directory_without_the_file_has_the_default_settings(tmp_path):
    # A model from elsewhere (no sparse_adapt.json) reads 64-piece queries and 256-piece documents.
    assert SpladeSettings.load(tmp_path) == SpladeSettings(64, 256, [], {}, "")


def test_saved_settings_load_as_they_were(tmp_path):
    settings = SpladeSettings(24, 48, [5, 7], {"zorblatt": "jargon"}, "tiny-bert")
    settings.save(tmp_path)
    assert SpladeSettings.load(tmp_path) == settings


@pytest.mark.parametrize("raw, message", [
    ({"doc_max_len": 9}, "unknown settings ['doc_max_len']"),
    ({"query_max_length": True}, "field 'query_max_length': expected a positive integer, got True"),
    ({"domain_token_ids": [True]}, "field 'domain_token_ids': expected a list of token ids"),
    ({"domain_token_ids": 5}, "field 'domain_token_ids': expected a list of token ids"),
    ({"domain_terms": {"zorblatt": 3}}, "field 'domain_terms': expected an object of term -> category"),
    ({"domain_terms": ["zorblatt"]}, "field 'domain_terms': expected an object of term -> category"),
    ({"base": 7}, "field 'base': expected a string, got 7"),
    ({"extended_from": ["b"]}, "field 'extended_from': expected a string, got ['b']"),
])
def test_a_field_of_the_wrong_type_is_refused_naming_it(tmp_path, raw, message):
    # Loaded, True was a length of 1 and an id of 1, a category 3 failed in the card, an unknown
    # name a TypeError from the dataclass; 5 as the ids failed iterating an int.
    (tmp_path / SETTINGS_FILE).write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ModelLoadError, match=re.escape(f"{tmp_path / SETTINGS_FILE}: {message}")):
        SpladeSettings.load(tmp_path)


def test_the_lowest_token_id_and_length_are_accepted(tmp_path):
    # ids count from 0 and a length of 1 encodes one piece: the bounds are ">= 0" and ">= 1"
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"domain_token_ids": [0, 4], "query_max_length": 1,
                                                      "doc_max_length": 1}), encoding="utf-8")
    assert SpladeSettings.load(tmp_path) == SpladeSettings(1, 1, [0, 4], {}, "")


def test_ids_beyond_the_vocabulary_are_refused_naming_the_first(tmp_path):
    settings = SpladeSettings(domain_token_ids=[3, 120, 150])
    settings.check_token_ids(tmp_path, 151)
    with pytest.raises(ModelLoadError, match=re.escape(f"{tmp_path / SETTINGS_FILE}: field 'domain_token_ids': 120 is "
                                                       "beyond the tokenizer's 100 tokens")):
        settings.check_token_ids(tmp_path, 100)
