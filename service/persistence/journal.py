"""Append-only journal of applied frames, so acknowledged data survives a crash between snapshots.

Each record is ``magic (4 bytes) | length (4) | crc32 of the payload (4) | crc32 of the 8 bytes
before (4) | payload``, the payload being ``destination UTF-8 | 0x00 | body``. A batch is appended
and fsynced before its frames are acknowledged. `rotate` starts a new segment when a snapshot is
taken; segments older than the last written snapshot are deleted.

Reading tells two kinds of damage apart (`read_segment`):

- **torn**: damage after which no intact record follows, i.e. the tail of a segment: a crash
  mid-append, whose batch was never fsynced and so never acknowledged;
- **corrupt**: damage with intact records after it (a flipped bit, a bad sector). Only the
  damaged bytes are lost: the reader finds the next record by its magic, checked by both CRCs
  (a body that happens to hold the magic fails them), and replays every intact record after it.

Segments written before the magic existed (``length | crc32 | payload``, told by their first
four bytes: a record length is never the magic's 3.6e9) are still read, in their old way: up
to their first bad record, since without a magic nothing after it can be found again; damage
before their end is reported as corrupt all the same.
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from io import BufferedWriter
from pathlib import Path
from typing import Literal

#: b"NJr\\xd9": as a little-endian length (the format before it) 3,648,145,998, which no record
#: reaches, so the first four bytes of a segment tell its format.
MAGIC = b"NJr\xd9"
_HEADER = struct.Struct("<4sIII")  # magic, payload length, payload crc32, crc32 of the 8 before
_LEGACY_HEADER = struct.Struct("<II")  # payload length, payload crc32
PREFIX = "journal-"
#: Appended to a segment's name for the copy kept as evidence of corruption.
REJECTED_SUFFIX = ".rejected"

DamageKind = Literal["torn", "corrupt"]


@dataclass(frozen=True)
class Damage:
    """Bytes of a segment that hold no intact record: `length` of them from `offset`."""

    kind: DamageKind
    offset: int
    length: int
    segment: str = ""
    #: Intact records read after the damage in the same segment.
    records_after: int = 0
    #: Where the damaged segment was copied (`<segment>.rejected`); only for corrupt damage.
    kept_as: str = ""


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        existing = self.segments()
        self._number = int(existing[-1].stem.removeprefix(PREFIX)) + 1 if existing else 1
        self._handle = self._open(self._number)
        #: What the last `replay` found damaged, in order.
        self.damage: list[Damage] = []

    def segments(self) -> list[Path]:
        """Journal files, oldest first (a `.rejected` copy is not one)."""
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
        """Delete the segments a written snapshot made redundant (`.rejected` copies stay)."""
        for segment in self.segments():
            if int(segment.stem.removeprefix(PREFIX)) < number:
                segment.unlink()

    def close(self) -> None:
        with self._lock:
            self._handle.close()

    def replay(self) -> Iterator[tuple[str, bytes]]:
        """Every intact frame of every segment, oldest first.

        Damage found is appended to `damage`; a segment with corrupt damage is first copied to
        `<segment>.rejected` (kept when the segment itself is deleted after the next snapshot).
        """
        self.damage = []
        for segment in self.segments():
            data = segment.read_bytes()
            found: list[Damage] = []
            frames = list(read_segment(data, found))
            kept_as = ""
            if any(damage.kind == "corrupt" for damage in found):
                kept = segment.with_name(segment.name + REJECTED_SUFFIX)
                shutil.copyfile(segment, kept)
                kept_as = str(kept)
            for damage in found:
                keep = kept_as if damage.kind == "corrupt" else ""
                self.damage.append(replace(damage, segment=segment.name, kept_as=keep))
            yield from frames

    def _open(self, number: int) -> BufferedWriter:
        return open(self.directory / f"{PREFIX}{number:012d}.log", "ab")


def _record(destination: str, body: bytes) -> bytes:
    payload = destination.encode() + b"\x00" + body
    sizes = struct.pack("<II", len(payload), zlib.crc32(payload))
    return MAGIC + sizes + struct.pack("<I", zlib.crc32(sizes)) + payload


def _intact_at(data: bytes, offset: int) -> int:
    """The end of the intact record at `offset`; -1 when there is none."""
    if offset + _HEADER.size > len(data):
        return -1
    magic, length, crc, header_crc = _HEADER.unpack_from(data, offset)
    if magic != MAGIC or zlib.crc32(data[offset + 4 : offset + 12]) != header_crc:
        return -1
    start = offset + _HEADER.size
    end: int = start + length
    if end > len(data) or zlib.crc32(data[start:end]) != crc:
        return -1
    return end


def _next_intact(data: bytes, offset: int) -> int:
    """Where the first intact record at or after `offset` starts; -1 when none does."""
    while (offset := data.find(MAGIC, offset)) >= 0:
        if _intact_at(data, offset) >= 0:
            return offset
        offset += 1
    return -1


def read_segment(data: bytes, damage: list[Damage] | None = None) -> Iterator[tuple[str, bytes]]:
    """The intact frames of one segment; what holds none is appended to `damage`."""
    if not data.startswith(MAGIC) and _next_intact(data, 0) < 0:
        yield from _read_legacy(data, damage)
        return
    found: list[tuple[DamageKind, int, int, int]] = []  # kind, offset, length, records before
    offset = records = 0
    while offset < len(data):
        end = _intact_at(data, offset)
        if end < 0:
            resume = _next_intact(data, offset + 1)
            kind: DamageKind = "torn" if resume < 0 else "corrupt"
            resume = len(data) if resume < 0 else resume
            found.append((kind, offset, resume - offset, records))
            offset = resume
            continue
        destination, _, body = data[offset + _HEADER.size : end].partition(b"\x00")
        yield destination.decode(errors="replace"), body
        records += 1
        offset = end
    if damage is not None:
        damage.extend(Damage(k, at, size, records_after=records - n) for k, at, size, n in found)


def _read_legacy(data: bytes, damage: list[Damage] | None) -> Iterator[tuple[str, bytes]]:
    """A segment of the format before the magic, up to its first bad record: torn when that
    record's length reaches past the end, corrupt otherwise (the rest cannot be found again)."""
    offset = 0
    while offset + _LEGACY_HEADER.size <= len(data):
        length, crc = _LEGACY_HEADER.unpack_from(data, offset)
        start = offset + _LEGACY_HEADER.size
        payload = data[start : start + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        destination, _, body = payload.partition(b"\x00")
        yield destination.decode(errors="replace"), body
        offset = start + length
    if offset < len(data) and damage is not None:
        whole = offset + _LEGACY_HEADER.size <= len(data)
        length = _LEGACY_HEADER.unpack_from(data, offset)[0] if whole else 0
        reaches_end = offset + _LEGACY_HEADER.size + length >= len(data)
        kind: DamageKind = "torn" if not whole or reaches_end else "corrupt"
        damage.append(Damage(kind, offset, len(data) - offset))
