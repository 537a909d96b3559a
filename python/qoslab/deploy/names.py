"""How names and values reach the files qoslab writes for a cluster, so that none of them can
become code or configuration of its own. A job name is chosen by whoever wrote the scenario (and
in a TaskProlog it is matched against `$SLURM_JOB_NAME`, which any user chooses), so every file
either carries it exactly, quoted by that file's own rules, or refuses it here with an
ExportError naming the job and the rule.

- Everywhere: 1..128 characters, no control, format or line-separator characters (a newline would
  end a comment or a line in every format written).
- Shell (TaskProlog, env files): single-quoted words, always (a bare `esac` would end a `case`),
  so `$(...)`, backticks, globs and quotes are literal characters of a `case` pattern.
- OpenSM's qos-policy.conf: double-quoted strings. Its lexer (osm_qos_parser_l.l) has no escape
  character: a quoted string holds anything but `"`; unquoted, `#` starts a comment, `,` separates
  list items, whitespace is dropped and words like `port-group` are keywords. Its parser trims
  white space at both ends and copies strings into a 10 KiB buffer, hence no leading or trailing
  blanks and the length cap.
- opensm.conf: values are single words (whitespace separates key and value, `#` starts a comment).
- README.md: names, policy labels and paths as code spans (exact when rendered, and no backslash
  escapes when read as plain text); qoslab's own prose escaped only where Markdown would read it.
- File names: the name with anything outside `A-Za-z0-9_.+-` replaced by `_`; two jobs that would
  share a file, or whose names differ only in case (one OpenSM port group, as it compares names
  without case), are refused.
"""

from __future__ import annotations

import re
import unicodedata

from qoslab.io.lines import OPENSM_LINE_BYTES, UNWRITABLE, comment, fits

MAX_NAME_CHARS = 128
_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.+-]")


class ExportError(ValueError):
    """What qoslab refuses to write for a cluster, and why."""


def _unwritable(text: str) -> str | None:
    for ch in text:
        if unicodedata.category(ch) in UNWRITABLE:
            label = unicodedata.name(ch, "") or "control character"
            return f"U+{ord(ch):04X} ({label.lower()})"
    return None


def check_name(name: str, what: str) -> str:
    """`name` if every generated file can carry it exactly; otherwise an ExportError naming `what`."""
    if not name:
        raise ExportError(f"{what}: an empty name cannot be written into cluster files")
    if len(name) > MAX_NAME_CHARS:
        raise ExportError(f"{what}: {len(name)} characters; names written into cluster files are limited to "
                          f"{MAX_NAME_CHARS}")
    bad = _unwritable(name)
    if bad:
        raise ExportError(f"{what} {name!r}: contains {bad}; names written into cluster files may not contain "
                          "control, format or line-separator characters")
    return name


def shell_word(text: str) -> str:
    """`text` as one literal shell word (also a literal `case` pattern), always single-quoted:
    `shlex.quote` leaves plain words bare, and a bare `esac` where a `case` pattern starts ends the
    statement."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def opensm_string(text: str, what: str) -> str:
    """`text` (a checked name, or text made of one) as one string of OpenSM's qos-policy.conf."""
    if _unwritable(text):
        check_name(text[:MAX_NAME_CHARS], what)
    if '"' in text:
        raise ExportError(f'{what} {text!r}: contains \'"\', which OpenSM\'s qos-policy.conf cannot hold (its '
                          "quoted strings have no escape character); rename the job")
    if text != text.strip():
        raise ExportError(f"{what} {text!r}: starts or ends with white space, which OpenSM's qos-policy.conf "
                          "parser strips (the name would change); rename the job")
    return f'"{text}"'


def conf_word(value: str, what: str, option: str) -> str:
    """`value` as the value of opensm.conf's `option`: one word without '#', on a line OpenSM reads whole."""
    bad = _unwritable(value)
    if not value or bad or any(ch.isspace() for ch in value) or "#" in value:
        raise ExportError(f"{what} {value!r}: opensm.conf takes it as one word: expected no white space, '#' or "
                          f"control characters{f' (found {bad})' if bad else ''}")
    if not fits(f"{option} {value}", OPENSM_LINE_BYTES):
        raise ExportError(f"{what}: {len(value.encode())} bytes; OpenSM reads opensm.conf lines of at most "
                          f"{OPENSM_LINE_BYTES} bytes and would cut the '{option}' line")
    return value


def markdown_code(text: str, table: bool = False) -> str:
    """`text` (a name, a policy label, a path) as a Markdown code span: shown exactly as written,
    whether the README is rendered or read as plain text (backslash escapes would show in the
    latter). The fence is one backtick longer than the longest run of backticks in the text, with
    a blank inside where the text starts or ends with a backtick (CommonMark strips it); in a
    table cell `|` is escaped, since GFM splits a row into cells before it reads code spans."""
    text = comment(text)
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_text(text: str) -> str:
    """qoslab's own prose in running Markdown (or a table cell), shown as written and as plain
    text with as few backslashes as will do: those that could start formatting, code, HTML or a
    cell break are escaped; `_` only where it could start emphasis (inside a word, as in
    MV2_USE_QOS, it never does); `]` only before `(` or `[`, where it would close a link (the
    README defines no link references, so `[1, 3]` alone is text)."""
    text = re.sub(r"([\\`*<|])", r"\\\1", comment(text))
    text = re.sub(r"\](?=[(\[])", r"\\]", text)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)


def file_stems(names: list[str]) -> dict[str, str]:
    """A file name stem for each job name; refuses two jobs that would share one."""
    stems: dict[str, str] = {}
    owner: dict[str, str] = {}  # by the stem without case: the job that has it
    for name in names:
        stem = _FILE_CHARS.sub("_", name)
        if stem[0] in ".-":  # no hidden files, nothing a command takes for an option
            stem = "_" + stem
        # Compared without case: OpenSM matches qos-policy.conf port-group names without case
        # (strcasecmp: the second of two such groups is never used), and so do some file systems.
        key = stem.lower()
        if key in owner:
            first = owner[key]
            if first.lower() == name.lower():
                raise ExportError(f"jobs {first!r} and {name!r} differ only in case: OpenSM compares qos-policy.conf "
                                  "port-group names without case (the second group would never be used); rename "
                                  "one of them")
            shared = (f"would both be written to env/{stem}.env" if stems[first] == stem else
                      f"would be written to env/{stems[first]}.env and env/{stem}.env, one file where file names "
                      "ignore case")
            raise ExportError(f"jobs {first!r} and {name!r} {shared}; rename one of them")
        owner[key] = name
        stems[name] = stem
    return stems
