"""Files in and out: JSON lines read with line numbers in errors, and writes that never leave half a file.

Every file the package writes goes through :func:`atomic_open` / :func:`write_atomic`: the text goes to a temporary
file beside the target, which replaces the target only when the write finished, so a killed run or a full disk
leaves the old file (or none), never a torn one.

About 550 lines: every file the package writes goes through here (atomic files and folders, locks, resumable
outputs, bounded reads), so the write-fault rules live in one place.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from .http import redact


__all__ = [
    "broken_link",
    "read_json_bounded",
    "PACKAGE_DIR",
    "ResumableOutput",
    "atomic_folder",
    "atomic_open",
    "check_input_file",
    "check_outside_package",
    "check_output_dir",
    "check_output_path",
    "file_signature",
    "hold_lock",
    "local_names",
    "naming_errors",
    "open_stream",
    "read_jsonl",
    "read_utf8",
    "record_key",
    "release_lock",
    "remove_stale_folders",
    "remove_stale_temps",
    "staging_folder",
    "write_atomic",
]


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The text of a UTF-8 file (``-`` reads standard input).

    Raises:
        ValueError: The text is not UTF-8 (the message names the file, the byte and the fix).
    """
    try:
        return sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"input file {str(path)!r} is not UTF-8 text (byte {err.start}: {err.reason}): save it as "
                         "UTF-8.") from err


def check_input_file(path: str | os.PathLike[str]) -> None:
    """A FileNotFoundError naming ``path`` unless it is a file (or ``-``, standard input)."""
    if str(path) != "-" and not Path(path).is_file():
        raise FileNotFoundError(f"input file {str(path)!r} does not exist (or is not a file).")


def read_jsonl(path: str | os.PathLike[str]) -> list[tuple[int, Any]]:
    """``(line number, parsed record)`` for each non-empty line of a JSONL file (``-`` reads standard input).

    Raises:
        FileNotFoundError: The file does not exist (the message names it).
        ValueError: The file is not UTF-8, or a line is not JSON (the message names the file and line).
    """
    check_input_file(path)
    lines = read_utf8(path).removeprefix("\ufeff").splitlines()  # a byte-order mark, as Windows editors write
    records = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append((lineno, json.loads(line)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno} is not valid JSON ({err}).") from err
    return records


STALE_TEMP_SECONDS = 3600  # a temporary file of ours older than this is left over from a killed run
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the installed ares_rerank package: never a place for results


def remove_stale_temps(path: Path) -> None:
    """Remove temporary files :func:`atomic_open` left beside ``path`` in runs that were killed (SIGKILL cannot be
    caught) more than :data:`STALE_TEMP_SECONDS` ago."""
    now = time.time()
    for old in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - old.lstat().st_mtime > STALE_TEMP_SECONDS:
                old.unlink()


def staging_folder(path: Path, kind: str) -> Path:
    """A new private folder ``.<name>.<kind>-<pid>-*`` beside ``path`` for a save to write into; those that killed
    saves of ``path`` left (their process is gone, or they are older than :data:`STALE_TEMP_SECONDS`) are removed
    first, so they never pile up."""
    remove_stale_folders(path, kind)
    return Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{kind}-{os.getpid()}-"))


def remove_stale_folders(path: Path, kind: str) -> None:
    """Remove the folders ``.<name>.<kind>-*`` beside ``path`` that a killed save left: made by a process that no
    longer runs (the pid in the name), or older than :data:`STALE_TEMP_SECONDS` (a name without one)."""
    import shutil

    now = time.time()
    for old in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
        pid = old.name[len(f".{path.name}.{kind}-"):].partition("-")[0]
        with contextlib.suppress(OSError):
            if old.is_symlink() or not old.is_dir():
                continue
            if (_process_gone(int(pid)) if pid.isdigit() and int(pid) != os.getpid()
                    else now - old.lstat().st_mtime > STALE_TEMP_SECONDS):
                shutil.rmtree(old)


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user
        return False
    return False


def _created_mode(base: int) -> int:
    """The permissions ``open`` / ``mkdir`` give a new file (``base`` 0o666) or folder (0o777) under this process's
    umask. ``tempfile`` creates private ones (0o600 / 0o700); outputs that replace them must not stay private."""
    try:  # Linux reports the umask without changing it (os.umask would, for every thread, for a moment)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return base & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return base & ~mask


_DESCRIPTOR = re.compile(r"/(?:proc/[^/]+|dev)/fd/\d+")


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is (or links to) a character device, FIFO or socket, or is one of this process's descriptors
    (``/dev/stdout`` -> ``/proc/self/fd/1``, ``/dev/fd/3``) whatever it is open on: written through, never replaced.

    A descriptor link looks like a symlink to a regular file when the shell redirected the stream to one; replacing
    the link would take the results away from the stream, and, for ``/dev/stdout``, replace the system's link.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return True
    link = Path(os.path.abspath(path))
    for _ in range(40):  # follow the links one at a time (a loop would have failed the stat above)
        if _DESCRIPTOR.fullmatch(link.as_posix()):
            return True
        parent = Path(os.path.realpath(link.parent))  # /dev/fd is itself a link to /proc/self/fd
        if _DESCRIPTOR.fullmatch((parent / link.name).as_posix()):
            return True
        if not link.is_symlink():
            return False
        link = Path(os.path.normpath(parent / os.readlink(link)))
    return False


#: Seconds :func:`open_stream` waits for something to read a named pipe given as an output, before refusing it.
FIFO_READER_WAIT = 10.0


def open_stream(path: str | os.PathLike[str], flag: str | None = "--output", mode: str = "w") -> Any:
    """``path`` (a stream: :func:`is_stream`) opened for writing (``mode`` ``"w"``: UTF-8 text, ``"wb"``: bytes).
    A named pipe is opened only once something reads it, waited for at most :data:`FIFO_READER_WAIT` seconds
    (opening a FIFO nobody reads blocks for ever; a reader started just after the command is still in time).

    Raises:
        ValueError: A FIFO that nothing opened for reading in time; the message names ``flag``, the pipe and the fix.
    """
    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        fifo = False
    encoding = None if "b" in mode else "utf-8"
    if not fifo:
        return open(path, mode, encoding=encoding)
    deadline = time.monotonic() + FIFO_READER_WAIT
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # ENXIO at once while nobody reads
            break
        except OSError as err:
            if err.errno != errno.ENXIO:
                raise
            if time.monotonic() >= deadline:
                named = f"{flag} {str(path)!r}" if flag else repr(str(path))
                raise ValueError(f"{named} is a named pipe (FIFO) that nothing read within "
                                 f"{FIFO_READER_WAIT:g} s: start its reader first (e.g. `cat {path} > out.jsonl &`), "
                                 "or give a file.") from None
            time.sleep(0.05)
    os.set_blocking(fd, True)  # from here on a write waits for the reader, as a pipe does
    return os.fdopen(fd, mode, encoding=encoding)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[Any]:
    """Open ``path`` for writing (``mode`` ``"w"`` text, ``"wb"`` bytes) so that it appears only complete: a temporary
    file beside it is moved into place when the ``with`` block ends without an error, and removed when it raises (the
    parent folder is created). A symlink at ``path`` is replaced by the file, never written through. The file gets the
    permissions of the file it replaces, or those a plain ``open`` would give it (not ``tempfile``'s private 0o600).
    A stream at ``path`` (a character device such as ``/dev/null``, a FIFO, or a link to one such as ``/dev/stdout``)
    is written through as it is: there is no file to replace, and replacing the device would break it.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open(mode={mode!r}) writes a whole new file: use 'w' or 'wb'.")
    path = Path(path)
    if is_stream(path):
        with open_stream(path, None, mode) as handle:  # a FIFO only once it has a reader
            yield handle
        return
    if path.is_dir() and not path.is_symlink():  # os.replace would fail after the work, naming the temporary file
        raise IsADirectoryError(errno.EISDIR, "Is a directory (move it away, or write elsewhere)", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with naming_errors(path), os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            previous = path.stat().st_mode & 0o777 if path.is_file() and not path.is_symlink() else None
            os.chmod(tmp, previous if previous is not None else _created_mode(0o666))
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh folder beside ``path`` to write into; when the ``with`` block ends without an error it replaces
    ``path`` (the old folder is moved aside, then removed), and when it raises it is removed and ``path`` is untouched.

    The swap is two renames in the same folder: a process killed between them leaves the previous version as
    ``.<name>.old-*`` beside ``path``, never a half-written folder at ``path``. What killed saves left beside
    ``path`` (``.<name>.new-*``, ``.<name>.old-*``) is removed by the next save (:func:`remove_stale_folders`).
    """
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = staging_folder(path, "new")
    try:
        os.chmod(fresh, _created_mode(0o777))  # a folder like mkdir's, not mkdtemp's private 0o700
        yield fresh
        old = None
        if path.exists() or path.is_symlink():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-{os.getpid()}-"))
            os.rmdir(old)
            os.replace(path, old)
        os.replace(fresh, path)
        if old is not None and old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        elif old is not None:
            old.unlink()
        remove_stale_folders(path, "old")  # a previous version a killed swap left: ``path`` is whole again
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


def check_output_path(path: str | os.PathLike[str], *, flag: str = "--output",
                      inputs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """Check, before any work, that results can be written to the file ``path`` (a stream, see :func:`is_stream`,
    passes as it is).

    Raises:
        ValueError: ``path`` is a folder, is one of ``inputs`` (it would be overwritten), or its folder cannot be
            created or written; the message names ``flag``, the path and the fix.
    """
    path = Path(path)
    if is_stream(path):  # /dev/stdout, /dev/null, a FIFO: written through, no folder of ours to check or probe
        return path
    if path.is_dir():
        raise ValueError(f"{flag}={str(path)!r} is a folder: name a file inside it, e.g. {str(path / 'out.jsonl')!r}.")
    for source in inputs:
        if str(source) != "-" and Path(source).exists() and path.exists() and os.path.samefile(source, path):
            raise ValueError(f"{flag}={str(path)!r} is the input file: writing it would destroy the input; name "
                             "another file.")
    check_output_dir(path.parent, flag=flag)
    return path


def check_outside_package(path: str | os.PathLike[str], *, flag: str) -> None:
    """Raise a ValueError naming ``flag`` when ``path`` lies inside the installed package (links and ``..`` resolved):
    what is written there is lost on the next install, or lands in the source tree of an editable one."""
    resolved = Path(path).resolve()
    if resolved == PACKAGE_DIR or PACKAGE_DIR in resolved.parents:
        raise ValueError(f"{flag}: {str(path)!r} is inside the installed ares_rerank package ({PACKAGE_DIR}): results "
                         "written there are lost on the next install; choose a folder of your own.")


def check_output_dir(folder: str | os.PathLike[str], *, flag: str = "--out") -> Path:
    """Create ``folder`` if needed and check it is a writable folder outside the installed package (before any
    work)."""
    folder = Path(folder)
    check_outside_package(folder, flag=flag)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"{flag}: cannot create the folder {str(folder)!r} ({err.strerror or err}).") from err
    if not folder.is_dir():
        raise ValueError(f"{flag}: {str(folder)!r} is not a folder.")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"{flag}: cannot write in the folder {str(folder)!r} ({err.strerror or err}).") from err
    return folder


def prepare_run_dir(folder: str | os.PathLike[str], *, result: str, overwrite: bool, flag: str = "output_dir",
                    overwrite_flag: str = "--overwrite_output_dir true") -> Path:
    """Before any training: ``folder`` is a writable folder outside the package (:func:`check_output_dir`) that holds
    no earlier run's ``result`` folder or ``checkpoint-*`` unless ``overwrite``; then the earlier checkpoints are
    removed (so that checkpoint rotation and the best checkpoint are this run's alone), and ``result`` is replaced
    only when the new one is saved.

    Raises:
        ValueError: the folder cannot be written, or holds an earlier run and ``overwrite`` is false; the message
            names ``flag``, the folder and the fix.
    """
    import shutil

    out = check_output_dir(folder, flag=flag)
    earlier = sorted(p.name for p in out.iterdir() if p.name == result or p.name.startswith("checkpoint-"))
    if earlier and not overwrite:
        shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        raise ValueError(f"{flag}={str(folder)!r} holds an earlier run ({shown}) that training would replace: pass a "
                         f"new --{flag}, or {overwrite_flag} to replace it.")
    for name in earlier:
        if name != result:
            old = out / name
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
    return out


class ResumableOutput:
    """JSON-lines results written batch by batch, so that a long run that stops can resume where it stopped.

    Records go to ``.<name>.partial`` beside ``path`` (flushed and synced after every batch), whose first line records
    the run's ``settings`` and each next line one record with the key of the input it answers; :meth:`finish` moves
    the records onto ``path``, so ``path`` only ever holds a complete result and an existing ``path`` stays untouched
    until then. A rerun with the same settings resumes: :meth:`resume` keeps the records whose keys match the inputs
    in order (a torn, duplicated or foreign line and everything after it is cut away) and the caller skips that many
    inputs. Other settings (put the input file's :func:`file_signature` in them) refuse to mix results.

    One run at a time: the object holds an advisory lock (``flock``) on ``.<name>.lock`` from construction to
    :meth:`finish` / :meth:`close`, and a second run on the same ``path`` is refused. The operating system releases
    the lock of a killed process, so a stale lock file never blocks a rerun.

    Args:
        path: The final output file.
        settings: What makes records comparable (command, backbone, method, estimator settings, input file...).
        resume: ``False`` discards an existing partial file instead of continuing it.

    Raises:
        ValueError: Another run holds the lock, or the partial file was made with other settings.
    """

    MARKER = "ares_rerank_partial"
    VERSION = 2  # 2: each line {"key", "record"}; version 1 (records alone) cannot be checked against the input

    def __init__(self, path: str | os.PathLike[str], settings: dict[str, Any], resume: bool = True) -> None:
        self.path = Path(path)
        self.partial = self.path.with_name(f".{self.path.name}.partial")
        self.lock = self.path.with_name(f".{self.path.name}.lock")
        # credentials never reach the disk (a killed run leaves this header): a URL's password, an api_key ...
        self.settings = redact(json.loads(json.dumps(settings, default=str)))
        self.count = 0
        self.dropped = 0  # lines of the partial file that :meth:`resume` cut away
        self._lock_fd: int | None = hold_lock(self.lock, self.path)
        try:
            if self.partial.is_symlink():  # appending through it would write into whatever it points to
                raise ValueError(_linked(self.partial, self.path, "partial results"))
            self._started = resume and self.partial.is_file()  # a fresh partial file is written with the first batch
            if self._started:
                self._check_header()
        except BaseException:
            self.close()
            raise

    def _check_header(self) -> None:
        with open(self.partial, "rb") as handle:
            first = handle.readline(1 << 20)
        try:
            header = json.loads(first) if first.endswith(b"\n") else {}
        except ValueError:
            header = {}
        if not isinstance(header, dict) or header.get(self.MARKER) != self.VERSION or header.get(
                "settings") != self.settings:
            earlier = header.get("settings") if isinstance(header, dict) else None
            changed = _changed_settings(earlier, self.settings) if isinstance(earlier, dict) else ""
            raise ValueError(
                f"{str(self.partial)!r} holds partial results of a run with other settings"
                + (f" ({changed})" if changed else " (or of another version, or is not ours)")
                + ": rerun with --no-resume to discard it, or rerun the original command to finish it."
            )

    def resume(self, keys: Sequence[str]) -> int:
        """Check the partial file against the inputs' ``keys`` (see :func:`record_key`) and return how many inputs
        are done: the records whose keys equal ``keys[0], keys[1], ...`` in order. Any line after them (torn by a kill,
        duplicated, or for another input) is cut away and counted in :attr:`dropped`, so no record is ever doubled
        or lost; those inputs are scored again."""
        self.count = self.dropped = 0
        if not self._started:
            return 0
        with open(self.partial, "rb") as handle:
            keep = len(handle.readline())  # the settings header, checked when the object was made
            for line in handle:
                try:
                    entry = json.loads(line) if line.endswith(b"\n") else None
                except ValueError:
                    entry = None
                if (self.dropped or not isinstance(entry, dict) or self.count >= len(keys)
                        or entry.get("key") != keys[self.count] or "record" not in entry):
                    self.dropped += 1
                    continue
                self.count += 1
                keep += len(line)
        if keep != self.partial.stat().st_size:
            os.truncate(self.partial, keep)
        return self.count

    def append(self, records: Sequence[Any], keys: Sequence[str]) -> None:
        """Add one batch of records (the answers to the inputs of ``keys``) and make it durable.

        Raises:
            OSError: The write failed (a full disk, a file-size limit); the message names the partial file, and the
                file keeps whole lines only.
        """
        if len(keys) != len(records):
            raise ValueError(f"append(records, keys): {len(records)} records and {len(keys)} keys; give one key each.")
        if not self._started:
            write_atomic(self.partial, json.dumps({self.MARKER: self.VERSION, "settings": self.settings}) + "\n")
            self._started = True
        size = self.partial.stat().st_size
        try:
            with naming_errors(self.partial), open(self.partial, "a", encoding="utf-8", opener=_no_follow) as handle:
                handle.writelines(json.dumps({"key": k, "record": r}) + "\n" for k, r in zip(keys, records))
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.truncate(self.partial, size)  # a failed batch (full disk, Ctrl-C) leaves whole lines only
            raise
        self.count += len(records)

    def finish(self) -> Path:
        """Write the complete result to ``path`` (atomically), remove the partial file and release the lock."""
        with atomic_open(self.path) as out:
            if self._started:
                with open(self.partial, encoding="utf-8") as partial:
                    partial.readline()  # the settings header
                    for line in partial:
                        out.write(json.dumps(json.loads(line)["record"]) + "\n")
        self.partial.unlink(missing_ok=True)
        self.close()
        return self.path

    def close(self) -> None:
        """Release the lock (the partial file stays for a rerun to resume); :meth:`finish` calls it."""
        if self._lock_fd is not None:
            release_lock(self.lock, self._lock_fd)
            self._lock_fd = None


def _changed_settings(earlier: dict[str, Any], now: dict[str, Any], shown: int = 4) -> str:
    """``"batch_size: 2 then, 4 now; ..."`` for the settings that differ (values clipped), at most ``shown``."""
    def clip(value: Any) -> str:
        text = json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."

    keys = [k for k in sorted(set(earlier) | set(now)) if earlier.get(k) != now.get(k)]
    parts = [f"{k}: {clip(earlier.get(k))} then, {clip(now.get(k))} now" for k in keys[:shown]]
    return "; ".join(parts) + (f"; {len(keys) - shown} more" if len(keys) > shown else "")


def hold_lock(lock: Path, target: Path) -> int:
    """An open descriptor holding an exclusive ``flock`` on the file ``lock`` (created, with this process's id in it),
    for writing ``target``; :func:`release_lock` gives it back. The operating system drops the lock when the process
    ends, however it ends, so a lock file left by a killed run never blocks.

    The lock file is opened without following a link (``O_NOFOLLOW``): one that is a symbolic link is refused.

    Raises:
        ValueError: Another process holds it, or it is a symbolic link; the message names ``target``, the process
            or the link, and the fix.
    """
    import fcntl

    for _ in range(100):  # a holder that finishes removes the file: lock the new one, not the removed one
        try:  # never through a link: a planted .lock -> elsewhere would have our pid written over its target
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP or lock.is_symlink():
                raise ValueError(_linked(lock, target, "lock")) from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise ValueError(f"another run (process {holder}) is writing {str(target)!r} (it holds {str(lock)!r}): "
                             "wait for it to end, or give another --output.") from None
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        opened = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)
    raise ValueError(f"could not lock {str(lock)!r} for {str(target)!r}: other runs keep replacing it; retry.")


def _no_follow(path: str, flags: int) -> int:
    """``open(..., opener=_no_follow)``: open ``path`` without following a link (``ELOOP`` when it is one)."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)


def _linked(path: Path, target: Path, what: str) -> str:
    return (f"{str(path)!r}, the {what} file for {str(target)!r}, is a symbolic link (to {os.readlink(path)!r}): "
            "it is never written through; remove it (it is not ours), or give another --output.")


def release_lock(lock: Path, fd: int) -> None:
    """Remove the lock file :func:`hold_lock` created and give the lock back (removed first, while still held, so
    that no other process locks a file that is about to go)."""
    with contextlib.suppress(OSError):
        os.unlink(lock)
    os.close(fd)


def record_key(position: int, value: Any) -> str:
    """The key of the input at ``position`` whose content is ``value`` (anything JSON can write): what
    :meth:`ResumableOutput.resume` checks a partial file's records against."""
    import hashlib

    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return f"{position}:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


@contextlib.contextmanager
def naming_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """Re-raise an ``OSError`` that names no file (a full disk's ``ENOSPC``, a size limit's ``EFBIG`` from ``write``)
    as the same error naming ``path``, with the fix."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None:
            raise
        hint = " (free space on that disk or raise the file-size limit, or write elsewhere)" if err.errno in (
            errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else ""
        raise OSError(err.errno, f"{err.strerror or err}{hint}", str(path)) from err


def file_signature(path: str | os.PathLike[str]) -> str:
    """Path, size and modification time of a file: enough to tell that a resumed run reads the same input."""
    if str(path) == "-":
        return "-"
    info = Path(path).stat()
    return f"{Path(path).resolve()}:{info.st_size}:{info.st_mtime_ns}"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_open`."""
    with atomic_open(path) as handle:
        handle.write(text)


def local_names(value: Any) -> Any:
    """``value`` with every local file or folder path replaced by its last part (``/home/me/runs/head`` ->
    ``head``), for records that leave this machine (a pushed model card, its calibration record): a folder's name
    says what it was, its path says whose machine it was on. Dicts, lists and tuples are walked; a Hub id
    (``owner/name`` that is not a local folder), a URL or a plain name is kept."""
    if isinstance(value, str):
        return _local_name(value)
    if isinstance(value, dict):
        return {k: local_names(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(local_names(v) for v in value)
    return value


def _local_name(text: str) -> str:
    if not text or len(text) > 4096 or "\n" in text or "://" in text:
        return text
    absolute = os.path.isabs(text) or text.startswith(("~", "./", "../", ".\\", "..\\"))
    try:
        local = absolute or ((os.sep in text or "/" in text) and Path(text).exists())
    except (OSError, ValueError):
        local = False
    return (Path(text).name or text.strip("/\\") or "/") if local else text


def broken_link(path: Path) -> str:
    """Why a symbolic link at ``path`` cannot be followed: a loop, a missing target, or unreadable."""
    try:
        os.stat(path)
    except OSError as err:
        return "links back to itself (a loop)" if err.errno == errno.ELOOP else "does not exist"
    return "cannot be read"


def read_json_bounded(path: Path, limit: int, example: str = '{"temperature": 1.3}',
                      fix: str = "calibrate the head again") -> Any:
    """The JSON of a small file (at most ``limit`` bytes, the size checked before reading), or a
    ValueError naming the file, what it should hold (``example``) and the ``fix``."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        raw = handle.read(limit + 1) if size <= limit else b""
    if size > limit or len(raw) > limit:
        raise ValueError(
            f"{path} is {max(size, len(raw)):,} bytes, more than a file of this kind can be "
            f"({limit:,}), so it was not read: replace "
            f"it with the right record, e.g. {example}, or {fix}."
        )
    try:
        return json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}): expected e.g. {example}; {fix}.") from err
