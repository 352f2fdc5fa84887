"""How large a gzip upload is once inflated, counted as it arrives.

A few kilobytes of gzip can inflate to gigabytes; the job that reads such a trace would keep a
worker busy for minutes. Each arriving chunk is inflated at once, in bounded pieces whose output
is dropped, so the service never holds (nor writes) the inflated trace and stops at the limit.
"""

from __future__ import annotations

import zlib

from ncompass._format import format_size

_PIECE = 1 << 20  # inflate at most 1 MiB at a time: memory stays flat whatever the ratio
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class InflatesTooLarge(Exception):
    """A gzip upload inflates past the service's limit."""


class NotGzip(Exception):
    """An upload that starts like gzip is not valid gzip."""


class InflatedSize:
    """Counts the inflated bytes of a gzip stream fed chunk by chunk (several members too).

    Args:
        limit: Inflated bytes allowed; one more raises :class:`InflatesTooLarge`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflated = 0
        self._inflater = zlib.decompressobj(_GZIP_WBITS)
        self._between_members = False

    def feed(self, chunk: bytes) -> None:
        """Inflate ``chunk`` (dropping the output) and count it.

        Raises:
            InflatesTooLarge: The stream so far inflates past the limit.
            NotGzip: The bytes are not gzip.
        """
        data = chunk
        while data:
            if self._between_members and not data.strip(b"\0"):
                # Zero bytes after a member are padding (tape and block devices write them).
                return
            self._between_members = False
            try:
                piece = self._inflater.decompress(data, _PIECE)
            except zlib.error as error:
                message = f"the upload starts like gzip but is not valid gzip ({error})"
                raise NotGzip(message) from None
            self.inflated += len(piece)
            if self.inflated > self.limit:
                raise InflatesTooLarge(
                    f"the gzip upload inflates to more than {format_size(self.limit, decimals=0)},"
                    " the most this service reads: filter the trace first (`ncompass filter`), "
                    "or restart the service with a larger --max-inflated-mb"
                )
            if self._inflater.eof:
                # Another gzip member may follow (``cat a.gz b.gz``): start it afresh.
                data = self._inflater.unused_data
                self._inflater = zlib.decompressobj(_GZIP_WBITS)
                self._between_members = True
            else:
                data = self._inflater.unconsumed_tail


__all__ = ["InflatedSize", "InflatesTooLarge", "NotGzip"]
