"""A study's --out folder belongs to one study at a time: a lock keeps a second qoslab process
out while one writes to it, and a marker names the study whose runs it holds, so that a different
study is refused instead of mixing its runs with the first one's (an export would then deploy
the wrong jobs). The same study may come back: to resume, or with policies added."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any, TextIO

from qoslab.errors import FolderError

LOCK = ".qoslab.lock"
MARKER = "study-id.json"
POINTS = "points"  # a sweep's points, each a study folder of its own: points/point=N/


def study_identity(kind: str, title: str, source: str | None, defining: Any, base: Any = None) -> dict[str, str]:
    """What makes two studies the same one: their kind and what places and builds their runs
    (`defining`: the base scenario and seeds; not the policy list, which may grow). With `base`
    (the base scenario as given, without seeds or sweep points), a study that only adds or drops
    repetitions or sweep points is the same one too: its runs are found again by their ids."""
    identity = {"kind": kind, "study": title, "source": source or "", "fingerprint": _digest(defining)}
    if base is not None:
        identity["base_fingerprint"] = _digest(base)
    return identity


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def held_study(out: Path) -> dict[str, Any] | None:
    """The identity of the study whose runs `out` holds (its marker), or None (none, or unreadable)."""
    try:
        held = json.loads((Path(out) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return held if isinstance(held, dict) else None


class StudyFolder:
    """`with StudyFolder(out, identity):` holds the folder for one study while it runs. The array
    tasks of one study (`shared`) hold it together, each writing only its own runs; a whole study,
    or the collection of an array's runs, holds it alone."""

    def __init__(self, out: Path, identity: dict[str, str], shared: bool = False):
        self.out = Path(out)
        self.identity = identity
        self.shared = shared
        self._lock: TextIO | None = None

    def __enter__(self) -> StudyFolder:
        self.out.mkdir(parents=True, exist_ok=True)
        lock = open(self.out / LOCK, "a+")
        try:
            fcntl.flock(lock, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            raise FolderError(f"{self.out}: another qoslab study is writing to this folder ({holder}); wait for it "
                              "to finish or choose another --out") from None
        if not self.shared:  # array tasks leave the holder's line as it is
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
            lock.flush()
        self._lock = lock
        try:
            self._claim()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _claim(self) -> None:
        marker = self.out / MARKER
        if marker.exists():
            try:
                held = json.loads(marker.read_text())
            except ValueError:
                held = None
            if not isinstance(held, dict):
                raise FolderError(f"{marker}: damaged (not the JSON qoslab writes); delete it if this folder holds "
                                  "nothing you need, or choose another --out")
            by_base = "base_fingerprint" in held and "base_fingerprint" in self.identity
            key = "base_fingerprint" if by_base else "fingerprint"
            if (held.get("kind"), held.get(key)) != (self.identity["kind"], self.identity[key]):
                differs = ("its base scenario differs" if by_base else
                           "its scenario differs, or its seeds or sweep points (folders written before 2026-11-27)")
                if held.get("kind") != self.identity["kind"]:
                    differs = f"it is a {held.get('kind')} study, this one a {self.identity['kind']} study"
                raise FolderError(
                    f"{self.out}: holds the runs of another study ({held.get('study')!r} from "
                    f"{held.get('source') or 'the built-in default'}: {differs}); this study "
                    f"({self.identity['study']!r} from {self.identity['source'] or 'the built-in default'}) would mix "
                    "its runs with them. Choose another --out, or delete the folder to start over")
        elif (self.out / "runs").is_dir() and any((self.out / "runs").iterdir()) and not self._same_legacy_study():
            raise FolderError(f"{self.out}: holds runs of a study qoslab cannot identify (no {MARKER}); choose another "
                              "--out, or delete the folder to start over")
        # Aside, then renamed: array tasks starting together each write the same marker whole.
        staging = self.out / f".{MARKER}.{socket.gethostname()}.{os.getpid()}"
        staging.write_text(json.dumps(self.identity, indent=1) + "\n")
        os.replace(staging, marker)

    def _same_legacy_study(self) -> bool:
        """A folder written before markers existed: its study.json names the study it holds."""
        try:
            meta = json.loads((self.out / "study.json").read_text())
        except (OSError, ValueError):
            return False
        return isinstance(meta, dict) and meta.get("name") == self.identity["study"] and \
            (meta.get("source") or "") == self.identity["source"]

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
