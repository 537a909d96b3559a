"""What one line of a file written for the real tools may hold. Their readers take a line into a
fixed buffer (`fgets`) and read whatever does not fit as a line of its own, so a long comment
would end early and its tail would become an option or a command: comments are split into lines
that fit, values that do not fit are refused, and a file read back is cut where the tool cuts
it. Characters that end a line for some reader (control, format and line-separator characters)
never reach a comment: they are written as \\uXXXX escapes."""

from __future__ import annotations

import unicodedata

OPENSM_LINE_BYTES = 1022  # opensm.conf: fgets(line, 1023)
IBSIM_LINE_BYTES = 255  # ibsim net files: a line is read into 256 bytes
# Cc control, Cf format (e.g. U+202E, which reorders what a reader sees), Cs lone surrogates (no
# UTF-8), Zl/Zp line and paragraph separators (line breaks to many readers).
UNWRITABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def comment(text: str) -> str:
    """`text` for a comment line: characters that would end the line are written as \\uXXXX escapes."""
    return "".join(f"\\u{ord(ch):04x}" if unicodedata.category(ch) in UNWRITABLE else ch for ch in text)


def comment_lines(text: str, limit: int, prefix: str = "# ") -> list[str]:
    """`text` as comment lines of at most `limit` UTF-8 bytes each, every one starting with `prefix`."""
    room = limit - len(prefix.encode())
    lines: list[str] = []
    piece: list[str] = []
    size = 0
    for ch in comment(text):
        width = len(ch.encode())
        if size + width > room:
            lines.append(prefix + "".join(piece))
            piece, size = [], 0
        piece.append(ch)
        size += width
    return [*lines, prefix + "".join(piece)]


def reader_lines(line: str, limit: int) -> list[str]:
    """The lines a reader that takes at most `limit` bytes at a time makes of `line` (one line,
    without its line break): `line` itself when it fits."""
    data = line.encode()
    if len(data) <= limit:
        return [line]
    return [data[i:i + limit].decode(errors="replace") for i in range(0, len(data), limit)]


def fits(line: str, limit: int) -> bool:
    return len(line.encode()) <= limit
