"""Append-only journal of applied frames, so acknowledged data survives a crash between snapshots.

Each record is ``length (4 bytes) | crc32 (4 bytes) | destination UTF-8 | 0x00 | body``. A batch is
appended and fsynced before its frames are acknowledged. `rotate` starts a new segment when a
snapshot is taken; segments older than the last written snapshot are deleted. Reading stops at
the first torn or corrupt record (a crash mid-append), which was never acknowledged.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from io import BufferedWriter
from pathlib import Path

_HEADER = struct.Struct("<II")
PREFIX = "journal-"


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        existing = self.segments()
        self._number = int(existing[-1].stem.removeprefix(PREFIX)) + 1 if existing else 1
        self._handle = self._open(self._number)

    def segments(self) -> list[Path]:
        """Journal files, oldest first."""
        return sorted(self.directory.glob(f"{PREFIX}*.log"))

    def append(self, frames: Sequence[tuple[str, bytes]]) -> None:
        """Write (destination, body) frames and fsync them as one batch."""
        records = b"".join(_record(destination, body) for destination, body in frames)
        with self._lock:
            self._handle.write(records)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def rotate(self) -> int:
        """Start a new segment; returns the number of the first segment not yet covered."""
        with self._lock:
            self._handle.close()
            self._number += 1
            self._handle = self._open(self._number)
            return self._number

    def drop_before(self, number: int) -> None:
        """Delete the segments a written snapshot made redundant."""
        for segment in self.segments():
            if int(segment.stem.removeprefix(PREFIX)) < number:
                segment.unlink()

    def close(self) -> None:
        with self._lock:
            self._handle.close()

    def replay(self) -> Iterator[tuple[str, bytes]]:
        """Every intact frame of every segment, oldest first."""
        for segment in self.segments():
            yield from read_segment(segment.read_bytes())

    def _open(self, number: int) -> BufferedWriter:
        return open(self.directory / f"{PREFIX}{number:012d}.log", "ab")


def _record(destination: str, body: bytes) -> bytes:
    payload = destination.encode() + b"\x00" + body
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_segment(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Frames of one segment up to the first torn or corrupt record."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        payload = data[offset + _HEADER.size : offset + _HEADER.size + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            return
        destination, _, body = payload.partition(b"\x00")
        yield destination.decode(errors="replace"), body
        offset += _HEADER.size + length
