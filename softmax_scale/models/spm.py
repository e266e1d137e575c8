"""SentencePiece vocabularies from a GGUF file (``tokenizer.ggml.model = "llama"``), tokenized as llama.cpp does.

A GGUF file of Llama 2, Mistral 7B and their kin carries the pieces, their scores and their types,
not merges.  llama.cpp's ``llm_tokenizer_spm_session`` tokenizes a text by

1. prepending a space when ``tokenizer.ggml.add_space_prefix`` is set (the default) at the start
   of the text and after every special token, then writing each space as ``"\u2581"``;
2. splitting the text into characters and merging, again and again, the adjacent pair whose
   concatenation is a piece of highest score (the leftmost among equal scores);
3. writing each final symbol as its piece, or, for a symbol that is not a piece, as its UTF-8
   bytes through the byte pieces ``<0xXX>``.

Special tokens (the file's unknown, control and user-defined pieces) found in the text are taken
as themselves, as llama.cpp does when asked to parse special tokens.  No BOS is added.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass

__all__ = ["SpmTokenizer"]

#: The character SentencePiece writes for a space.
SPACE = "\u2581"
#: GGUF token types (llama.cpp's ``llama_token_type``).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@dataclass(frozen=True)
class Encoding:
    """Token ids of one text (the attribute :class:`tokenizers.Encoding` gives the decoder)."""

    ids: list


class SpmTokenizer:
    """A SentencePiece vocabulary tokenized as llama.cpp tokenizes it (see the module docstring).

    Parameters
    ----------
    tokens : sequence of str
        The pieces (``tokenizer.ggml.tokens``).
    scores : sequence of float
        One score per piece (``tokenizer.ggml.scores``): the higher, the earlier a pair merges.
    token_type : sequence of int
        One GGUF token type per piece (``tokenizer.ggml.token_type``).
    add_space_prefix : bool
        Prepend a space to the text and after each special token
        (``tokenizer.ggml.add_space_prefix``).
    """

    def __init__(self, tokens, scores, token_type, add_space_prefix: bool = True):
        tokens, scores, types = list(tokens), [float(s) for s in scores], [int(k) for k in token_type]
        if not tokens:
            raise ValueError("`tokens` must not be empty")
        if len(scores) != len(tokens) or len(types) != len(tokens):
            raise ValueError(f"`scores` and `token_type` must have one entry per token ({len(tokens)}), "
                             f"got {len(scores)} and {len(types)}")
        self.tokens, self.scores, self.types = tokens, scores, types
        self.add_space_prefix = bool(add_space_prefix)
        self._id = {t: i for i, t in enumerate(tokens)}  # the last of equal pieces, as llama.cpp's map keeps
        self._byte = {}
        for b in range(256):
            i = self._id.get(f"<0x{b:02X}>", self._id.get(chr(b)))
            if i is not None:
                self._byte[b] = i
        special = sorted({t for t, k in zip(tokens, types) if k in (UNKNOWN, CONTROL, USER_DEFINED) and t},
                         key=lambda t: (-len(t), t))
        self._special = re.compile("|".join(map(re.escape, special))) if special else None

    # ---- encoding ----------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        """The token ids of ``text`` (``add_special_tokens`` must be False: no BOS is added)."""
        if not isinstance(text, str):
            raise TypeError(f"`text` must be a str, got {type(text).__name__}")
        if add_special_tokens:
            raise ValueError("`add_special_tokens` must be False: the decoder adds no BOS")
        ids: list = []
        after_special = True
        for piece, special in self._fragments(text):
            if special:
                ids.append(self._id[piece])
            else:
                prefix = " " if self.add_space_prefix and after_special else ""
                self._merge((prefix + piece).replace(" ", SPACE), ids)
            after_special = special
        return Encoding(ids)

    def _fragments(self, text):
        """``(piece, is_special)`` in order, empty raw pieces left out."""
        at = 0
        if self._special is not None:
            for m in self._special.finditer(text):
                if m.start() > at:
                    yield text[at:m.start()], False
                yield m.group(), True
                at = m.end()
        if at < len(text):
            yield text[at:], False

    def _merge(self, text: str, out: list) -> None:
        """llama.cpp's ``llm_tokenizer_spm_session::tokenize`` on one escaped fragment, appended to ``out``."""
        n = len(text)
        if n == 0:
            return
        size = [1] * n
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n)) + [-1]
        heap: list = []

        def push(left, right):
            if left < 0 or right < 0:
                return
            i = self._id.get(text[left:left + size[left] + size[right]])
            if i is not None:
                # highest score first, then the leftmost (llm_bigram_spm::comparator)
                heapq.heappush(heap, (-self.scores[i], left, right, size[left] + size[right]))

        for i in range(1, n):
            push(i - 1, i)
        while heap:
            _, left, right, width = heapq.heappop(heap)
            if size[left] == 0 or size[right] == 0 or size[left] + size[right] != width:
                continue  # one side was merged since
            size[left] += size[right]
            size[right] = 0
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(prev[left], left)
            push(left, nxt[left])
        i = 0
        while i != -1:
            symbol = text[i:i + size[i]]
            token = self._id.get(symbol)
            if token is not None:
                out.append(token)
            else:  # only a single character can be left unknown: every merge forms a piece
                for b in symbol.encode("utf-8"):
                    if b not in self._byte:
                        raise ValueError(f"the vocabulary has no piece for {symbol!r} and no byte piece <0x{b:02X}>")
                    out.append(self._byte[b])
            i = nxt[i]

    # ---- decoding ----------------------------------------------------------------------------
    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """The text of ``ids``: pieces with ``"\u2581"`` as a space, byte pieces as bytes, the prefix space removed."""
        out = bytearray()
        for i in ids:
            t, k = self.tokens[int(i)], self.types[int(i)]
            m = _BYTE_PIECE.fullmatch(t) if k == BYTE else None
            if m is not None:
                out.append(int(m.group(1), 16))
            elif k in (UNKNOWN, CONTROL) and skip_special_tokens:
                continue
            else:
                out += t.replace(SPACE, " ").encode("utf-8")
        text = out.decode("utf-8", errors="replace")
        return text[1:] if self.add_space_prefix and text.startswith(" ") else text
