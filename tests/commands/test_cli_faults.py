"""Fault injection for every CLI write: a run that ends badly (a typo, the output named as the input, a folder as the
output, a full disk, Ctrl-C, `kill`, `kill -9`) leaves every existing file byte for byte as it was, never a torn one;
a stopped run resumes where it stopped and ends with the same result as an uninterrupted one."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO = REPO_ROOT / "examples" / "claimtrees_demo.jsonl"
PACKAGE = Path(__import__("ares_rerank").__file__).resolve().parent
OLD = "yesterday's results, which must survive\n"


def _env(sleep: float = 0.0) -> dict[str, str]:
    here = Path(__file__).resolve().parent  # this room's tests, then tests/ (the shared helpers), then the checkout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (here, here.parent, REPO_ROOT))),
               PYTHONDONTWRITEBYTECODE="1", ARES_TEST_SLEEP=str(sleep), HF_HUB_OFFLINE="1")
    env.pop("ARES_DEBUG", None)
    return env


def _disk_limit(max_bytes: int):
    def limit() -> None:  # runs in the child: writes beyond max_bytes fail with EFBIG instead of killing it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return limit


def _cli(argv: list[str], cwd: Path, sleep: float = 0.0, max_bytes: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ares_rerank.cli", *argv], cwd=cwd, env=_env(sleep),
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_disk_limit(max_bytes) if max_bytes else None)


def _inputs(tmp_path: Path, copies: int = 1) -> dict[str, Path]:
    """Chains for score / distributed, candidates for rank (three prompts, two candidates each); ``copies`` repeats
    them (distinct ids) so that a run has work left long after its first batches."""
    records = [json.loads(line) for line in DEMO.read_text().splitlines()]
    chains = tmp_path / "chains.jsonl"
    with chains.open("w") as f:
        for copy in range(copies):
            for record in records:
                f.write(json.dumps({**record, "id": f"{record['id']}-{copy}" if copy else record["id"]}) + "\n")
    candidates = tmp_path / "candidates.jsonl"
    with candidates.open("w") as f:
        for copy in range(copies):
            for chain in records[:3]:
                prompt = "\n".join(chain["base_claims"]) + ("" if not copy else f"\nI have copy {copy}")
                f.write(json.dumps({"prompt": prompt, "candidates": ["\n".join(chain["steps"]),
                                                                     "\n".join(chain["steps"][:2])]}) + "\n")
    return {"score": chains, "rank": candidates}


def _argv(command: str, inputs: dict[str, Path], output: Path, backbone: str = "claimtrees-oracle",
          overwrite: bool = True) -> list[str]:
    common = ["--backbone", backbone, "--output", str(output), "--batch-size", "1", "--no-progress",
              *(["--overwrite"] if overwrite else [])]
    if command == "score":
        return ["score", str(inputs["score"]), *common]
    return ["rank", "--input", str(inputs["rank"]), "--step-separator", "\\n", "--prompt-split", "lines", *common]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line_error(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def _with_old_output(tmp_path: Path) -> tuple[dict[str, Path], Path, dict[str, bytes]]:
    """Inputs, an --output that already holds an earlier file, and a snapshot of the folder."""
    inputs = _inputs(tmp_path)
    output = tmp_path / "out.jsonl"
    output.write_text(OLD)
    return inputs, output, _snapshot(tmp_path)


@pytest.mark.parametrize("command", ["score", "rank"])
def test_an_existing_output_is_refused_before_any_work_unless_overwrite(tmp_path, command):
    """An earlier run's results (or any file) at --output were replaced without a word, even by an empty result."""
    inputs, output, before = _with_old_output(tmp_path)
    done = _cli(_argv(command, inputs, output, overwrite=False), tmp_path)
    assert "already exists: pass --overwrite" in _one_line_error(done)
    assert _snapshot(tmp_path) == before
    done = _cli(_argv(command, inputs, output), tmp_path)  # --overwrite
    assert done.returncode == 0, done.stderr
    assert len(output.read_text().splitlines()) == (6 if command == "score" else 3)


@pytest.mark.parametrize("command", ["score", "rank"])
def test_a_failed_start_leaves_every_file_as_it_was(tmp_path, command):
    inputs, output, before = _with_old_output(tmp_path)
    cases = {
        "backbone typo": (_argv(command, inputs, output, backbone=str(tmp_path / "no-such-model")), "no-such-model"),
        "output is the input": (_argv(command, inputs, inputs[command]), "is the input file"),
        "output is a folder": (_argv(command, inputs, tmp_path), "is a folder"),
        "output folder cannot exist": (_argv(command, inputs, inputs["score"] / "out.jsonl"), "cannot create"),
        "output inside the package": (_argv(command, inputs, PACKAGE / "results" / "out.jsonl"),
                                      "is inside the installed ares_rerank package"),
    }
    for name, (argv, message) in cases.items():
        done = _cli(argv, tmp_path)
        assert message in _one_line_error(done), (name, done.stderr)
        assert _snapshot(tmp_path) == before, name
    assert not (PACKAGE / "results").exists()  # not even the folder


@pytest.mark.parametrize("command", ["score", "rank"])
def test_a_full_disk_leaves_the_old_output_and_no_torn_file(tmp_path, command):
    inputs = _inputs(tmp_path)
    output = tmp_path / "out.jsonl"
    output.write_text(OLD * 200)  # larger than the limit: the old file is never rewritten, so it never hits it
    done = _cli(_argv(command, inputs, output), tmp_path, max_bytes=1500)
    partial = output.with_name(f".{output.name}.partial")
    message = _one_line_error(done)
    assert "File too large" in message and f": {partial}." in message, message  # the file it could not write
    assert output.read_text() == OLD * 200
    for line in partial.read_text().splitlines() if partial.exists() else []:
        json.loads(line)  # whatever was kept for a resume is whole lines
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("command", ["score", "rank"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_run_keeps_the_old_output_and_resumes_to_the_same_result(tmp_path, command, stop):
    inputs = _inputs(tmp_path, copies=5)  # tens of seconds of work left after two batches, even under load
    clean = tmp_path / "clean.jsonl"
    assert _cli(_argv(command, inputs, clean), tmp_path).returncode == 0
    output = tmp_path / "out.jsonl"
    output.write_text(OLD)
    partial = output.with_name(f".{output.name}.partial")
    argv = _argv(command, inputs, output, backbone="slow_backbone:SlowOracle")
    # A shell's background job (`pytest &`) starts with SIGINT ignored, and children inherit that: give the CLI the
    # default disposition, as a terminal would, so that it installs its own Ctrl-C handling.
    process = subprocess.Popen([sys.executable, "-m", "ares_rerank.cli", *argv], cwd=tmp_path, env=_env(sleep=0.3),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not partial.exists() or len(partial.read_text().splitlines()) < 3):
        time.sleep(0.05)  # the header and two batches are on disk: the first one's append has certainly returned
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    assert output.read_text() == OLD  # the stopped run never touched the result file
    if stop != signal.SIGKILL:
        assert process.returncode == 130 and "interrupted" in stderr and "rerun the same command" in stderr, stderr
    kept = 0  # whole records only: kill -9 can land in the middle of a line, which the resumed run drops
    for line in partial.read_bytes().split(b"\n")[1:]:
        try:
            json.loads(line)
        except ValueError:
            break
        kept += 1
    assert kept >= 1
    resumed = _cli(argv, tmp_path, sleep=0.0)
    assert resumed.returncode == 0, resumed.stderr
    assert output.read_bytes() == clean.read_bytes() and not partial.exists()
    assert not output.with_name(f".{output.name}.lock").exists()  # the killed run's lock file did not block
    if command == "score":
        assert f"resumed: {kept} chains" in resumed.stderr


def test_a_partial_run_with_other_settings_is_not_mixed_in(tmp_path):
    inputs = _inputs(tmp_path)
    output = tmp_path / "out.jsonl"
    partial = output.with_name(f".{output.name}.partial")
    partial.write_text(json.dumps({"ares_rerank_partial": 1, "settings": {"method": "entail-prev"}}) + "\n{}\n")
    done = _cli(_argv("score", inputs, output), tmp_path)
    assert "--no-resume" in _one_line_error(done) and not output.exists()
    assert _cli([*_argv("score", inputs, output), "--no-resume"], tmp_path).returncode == 0
    assert len(output.read_text().splitlines()) == len(DEMO.read_text().splitlines()) and not partial.exists()


@pytest.mark.parametrize("command", ["score", "rank"])
def test_a_second_run_on_the_same_output_is_refused_and_the_first_finishes(tmp_path, command):
    """Two runs on one --output both appended to one partial file: the first exited 0 with 388 records for 200."""
    inputs = _inputs(tmp_path, copies=5)
    clean = tmp_path / "clean.jsonl"
    assert _cli(_argv(command, inputs, clean), tmp_path).returncode == 0
    output = tmp_path / "out.jsonl"
    partial, lock = output.with_name(f".{output.name}.partial"), output.with_name(f".{output.name}.lock")
    argv = _argv(command, inputs, output, backbone="slow_backbone:SlowOracle")
    first = subprocess.Popen([sys.executable, "-m", "ares_rerank.cli", *argv], cwd=tmp_path, env=_env(sleep=0.3),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not partial.exists() or len(partial.read_text().splitlines()) < 2):
        time.sleep(0.05)  # the first run is past its start and writing
    for extra in ([], ["--no-resume"]):  # --no-resume must not discard the running one's partial file either
        second = _cli([*argv, *extra], tmp_path)
        message = _one_line_error(second)
        assert f"(process {first.pid}) is writing" in message and "give another --output" in message, message
    assert first.poll() is None  # the refusals came while the first run was still writing
    _, stderr = first.communicate(timeout=240)
    assert first.returncode == 0, stderr
    assert output.read_bytes() == clean.read_bytes()  # every record once
    assert not partial.exists() and not lock.exists()


def _partial_lines(partial: Path) -> list[bytes]:
    return partial.read_bytes().split(b"\n")[:-1]


@pytest.mark.parametrize("command", ["score", "rank"])
def test_a_resume_checks_the_ids_not_the_line_count(tmp_path, command):
    """A partial file whose last line is duplicated resumed to the right number of records with one chain lost."""
    inputs = _inputs(tmp_path, copies=5)
    clean = tmp_path / "clean.jsonl"
    assert _cli(_argv(command, inputs, clean), tmp_path).returncode == 0
    output = tmp_path / "out.jsonl"
    partial = output.with_name(f".{output.name}.partial")
    argv = _argv(command, inputs, output, backbone="slow_backbone:SlowOracle")
    _stop_after_two_batches(argv, partial, tmp_path)
    lines = _partial_lines(partial)
    assert len(lines) >= 3  # the header and two records
    header, records = lines[0], lines[1:]
    cases = {
        "last line duplicated": [*records, records[-1]],
        "a line for another input first": [records[1], *records],
        "a record line that is not ours": [*records[:1], b'{"id": "x"}', *records[1:]],
    }
    for name, body in cases.items():
        partial.write_bytes(b"\n".join([header, *body]) + b"\n")
        resumed = _cli(argv, tmp_path)
        assert resumed.returncode == 0, (name, resumed.stderr)
        assert output.read_bytes() == clean.read_bytes(), name  # no record doubled, none lost
        assert f"lines of {str(partial)!r} that do not answer the next inputs in order" in resumed.stderr, name
        output.unlink()


def _stop_after_two_batches(argv: list[str], partial: Path, cwd: Path) -> None:
    """Run the CLI with the slow backbone and stop it with Ctrl-C once two batches are in ``partial`` for sure: a
    third record's line shows the second batch was committed (a Ctrl-C during a batch's write rolls that batch back, so
    waiting for the second record's line alone was a race on a loaded machine)."""
    process = subprocess.Popen([sys.executable, "-m", "ares_rerank.cli", *argv], cwd=cwd, env=_env(sleep=0.3),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not partial.exists() or len(partial.read_text().splitlines()) < 4):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr


def test_the_lock_is_released_by_the_os_and_refuses_a_second_holder(tmp_path):
    from ares_rerank.utils.io import ResumableOutput

    output = tmp_path / "out.jsonl"
    lock = output.with_name(f".{output.name}.lock")
    lock.write_text("999999\n")  # left by a process killed long ago: no lock is held on it
    first = ResumableOutput(output, {"a": 1})
    with pytest.raises(ValueError, match=re.escape(f"(process {os.getpid()}) is writing")):
        ResumableOutput(output, {"a": 1})
    first.append([{"x": 1}], ["0:k"])
    first.finish()
    assert output.read_text() == '{"x": 1}\n' and not lock.exists()
    second = ResumableOutput(output, {"a": 1})  # taken again once released
    second.close()


@pytest.mark.parametrize("dangling", [False, True], ids=["to a file", "dangling"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path, dangling):
    """A .o.jsonl.lock planted as a link: writing the pid through it would overwrite the target (or create it)."""
    from ares_rerank.utils.io import ResumableOutput

    output = tmp_path / "out.jsonl"
    target = tmp_path / "precious.txt"
    if not dangling:
        target.write_text("keep me\n")
    lock = output.with_name(f".{output.name}.lock")
    lock.symlink_to(target)
    with pytest.raises(ValueError, match="is a symbolic link") as err:
        ResumableOutput(output, {"a": 1})
    assert str(lock) in str(err.value) and "remove it" in str(err.value)
    assert target.read_text() == "keep me\n" if not dangling else not target.exists()
    assert lock.is_symlink()  # not removed either: it is not ours


def test_a_partial_file_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path):
    from ares_rerank.utils.io import ResumableOutput

    output = tmp_path / "out.jsonl"
    target = tmp_path / "precious.jsonl"
    target.write_text('{"ares_rerank_partial": 2, "settings": {"a": 1}}\n')
    output.with_name(f".{output.name}.partial").symlink_to(target)
    with pytest.raises(ValueError, match="is a symbolic link"):
        ResumableOutput(output, {"a": 1})
    assert target.read_text() == '{"ares_rerank_partial": 2, "settings": {"a": 1}}\n'
    assert not output.with_name(f".{output.name}.lock").exists()  # the lock taken is given back


def test_a_command_with_a_linked_lock_file_is_one_error_line(tmp_path, capsys):
    from ares_rerank.cli import main

    output = tmp_path / "out.jsonl"
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    output.with_name(f".{output.name}.lock").symlink_to(target)
    assert main(["score", str(DEMO), "--backbone", "claimtrees-oracle", "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "symbolic link" in err and "Traceback" not in err
    assert target.read_text() == "keep me\n" and not output.exists()


def test_eval_and_distributed_outputs_survive_a_full_disk(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "mine.json").write_text(OLD * 200)
    (results / "mine.md").write_text(OLD * 200)
    before = _snapshot(results)
    done = _cli(["eval", "--backbone", "claimtrees-oracle",
                 "--task", "claimtrees", "--length", "5", "--n", "20", "--methods", "ares,entail-prev",
                 "--output-dir", str(results), "--name", "mine", "--no-progress", "--overwrite"], tmp_path,
                max_bytes=3000)
    message = _one_line_error(done)
    assert "File too large" in message and f"{results}/" in message, message
    assert {k: v for k, v in _snapshot(results).items() if not k.startswith("cache")} == before

    output = tmp_path / "scores.jsonl"
    output.write_text(OLD * 200)
    done = subprocess.run([sys.executable, "-m", "ares_rerank.distributed", "--data", str(DEMO), "--output",
                           str(output), "--backbone", "claimtrees-oracle"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300, preexec_fn=_disk_limit(1500))
    assert done.returncode != 0 and output.read_text() == OLD * 200
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    """Heads are saved through atomic_folder: a save that fails leaves the previous head byte for byte."""
    from ares_rerank.utils.io import atomic_folder

    head = tmp_path / "head"
    head.mkdir()
    (head / "adapter_model.safetensors").write_bytes(b"old weights")
    with pytest.raises(OSError, match="disk full"):
        with atomic_folder(head) as fresh:
            (fresh / "adapter_model.safetensors").write_bytes(b"new wei")
            raise OSError("disk full")
    assert _snapshot(head) == {"adapter_model.safetensors": b"old weights"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head"]
    with atomic_folder(head) as fresh:
        (fresh / "adapter_model.safetensors").write_bytes(b"new weights")
    assert _snapshot(head) == {"adapter_model.safetensors": b"new weights"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head"]


def test_atomic_outputs_get_the_permissions_a_plain_write_would_not_tempfiles_private_ones(tmp_path):
    """tempfile makes 0o600 files and 0o700 folders; results and saved heads must be readable like any output."""
    import os

    from ares_rerank.utils.io import atomic_folder, write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "results.json", "{}")
        with atomic_folder(tmp_path / "head") as fresh:
            (fresh / "config.json").write_text("{}")
        (tmp_path / "private.json").write_text("{}")
        os.chmod(tmp_path / "private.json", 0o640)
        write_atomic(tmp_path / "private.json", "{}")  # a replaced file keeps its own mode
    finally:
        os.umask(old)
    assert (tmp_path / "results.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "head").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("command", ["score", "rank"])
def test_an_output_fifo_is_written_through_not_replaced(tmp_path, command):
    """--output /dev/stdout, /dev/null or a named pipe: the atomic rename would replace the device with a file (as
    root, /dev/null itself); a stream is written through instead."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    done = _cli(_argv(command, _inputs(tmp_path), fifo), tmp_path)
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still the pipe
    lines = [json.loads(line) for line in received[0].splitlines()]
    assert len(lines) == (6 if command == "score" else 3)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".pipe")]  # no temporary left beside it


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["score", "rank"])
def test_an_output_fifo_that_nothing_reads_is_refused_before_any_work(tmp_path, monkeypatch, capsys, command):
    """Opening a FIFO nobody reads blocked for ever: the command waits a moment for a reader (FIFO_READER_WAIT),
    then ends with one error line, the pipe still a pipe and nothing scored."""
    import stat

    from ares_rerank.cli import main
    from ares_rerank.utils import io as io_module

    monkeypatch.setattr(io_module, "FIFO_READER_WAIT", 0.5)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = _argv(command, _inputs(tmp_path), fifo)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "is a named pipe (FIFO) that nothing read within 0.5 s" in line and "start its reader first" in line
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_an_atomic_write_to_a_fifo_that_nothing_reads_is_refused(tmp_path, monkeypatch):
    from ares_rerank.utils import io as io_module

    monkeypatch.setattr(io_module, "FIFO_READER_WAIT", 0.2)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="named pipe"):
        io_module.write_atomic(fifo, "{}\n")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
@pytest.mark.parametrize("command", ["score", "rank"])
def test_an_output_linked_to_a_redirected_descriptor_is_written_through(tmp_path, command):
    """``--output /dev/stdout`` with stdout redirected to a file: the link resolves to a regular file, so the atomic
    rename replaced the link (as root, /dev/stdout itself) and the redirected stream received nothing."""
    link = tmp_path / "my_stdout"
    link.symlink_to("/proc/self/fd/1")
    captured = tmp_path / "captured.jsonl"
    inputs = _inputs(tmp_path)
    with captured.open("w") as stdout:
        done = subprocess.run([sys.executable, "-m", "ares_rerank.cli", *_argv(command, inputs, link)],
                              cwd=tmp_path, env=_env(), stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"  # the link is still a link
    lines = [json.loads(line) for line in captured.read_text().splitlines()]
    assert len(lines) == (6 if command == "score" else 3)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".my_stdout")]  # no partial beside it
