"""The SSH door's text encoding: UTF-8 that never holds bytes back between packets.

asyncssh decodes a channel's data with an incremental decoder and, at end of input, calls its final
``decode(b"", True)`` only to check for errors, dropping what it returns: the last bytes of an upload
that end inside a UTF-8 sequence (one in a few of binary uploads: ``ssh host 'cat > f' < blob``) were
lost. This decoder decodes every packet at once, an incomplete sequence at its end as
``surrogateescape`` code points, so nothing waits for that final call. Data read as bytes again
(``encode("utf-8", "surrogateescape")``) is exactly what was sent; a line of text is made whole again
with :func:`heal` (a character split between two packets becomes itself).
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["ENCODING", "heal"]

ENCODING = "afi-ssh-utf-8"
_LOOKUP = "afi_ssh_utf_8"  # the name as codecs hands it to a search function


class _EagerDecoder(codecs.IncrementalDecoder):
    def decode(self, input: Buffer, final: bool = False) -> str:
        return bytes(input).decode("utf-8", self.errors)


def _search(name: str) -> codecs.CodecInfo | None:
    if name not in (_LOOKUP, ENCODING):
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(
        name=ENCODING,
        encode=utf8.encode,
        decode=utf8.decode,
        incrementalencoder=utf8.incrementalencoder,
        incrementaldecoder=_EagerDecoder,
        streamreader=utf8.streamreader,
        streamwriter=utf8.streamwriter,
    )


codecs.register(_search)


def heal(text: str) -> str:
    """Given text decoded a packet at a time, return it with characters split between packets whole."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
