"""The installed package on its own: built as a wheel, installed into a fresh virtual environment, run from an empty
folder with no checkout on ``sys.path``. A user trains a head from labelled chains, calibrates it, loads it and
evaluates it through the CLI, and every file written lands in that folder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest


REPO_ROOT = Path(__file__).resolve().parents[1]


def _tree_digest(folder: Path) -> dict[str, str]:
    """Relative path -> sha1 of every file under ``folder`` (``__pycache__`` skipped: Python may write there)."""
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _checkout_state() -> str:
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=REPO_ROOT,
                         capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line]
    return "\n".join(lines) if out.returncode == 0 else ""


def _outer_environment_paths() -> list[str]:
    """The folders the running interpreter finds packages in beyond its base interpreter's own (empty outside a
    virtual environment): a venv's site-packages and what its ``.pth`` files add, never the checkout. A venv made with
    ``system_site_packages=True`` from inside a venv sees the base interpreter's packages only."""
    if sys.prefix == sys.base_prefix:
        return []
    base = [Path(sys.base_prefix).resolve(), Path(sys.base_exec_prefix).resolve()]
    paths = []
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if not path.is_dir() or path == REPO_ROOT or REPO_ROOT in path.parents:
            continue
        if any(path == b or b in path.parents for b in base):  # the base's stdlib and site-packages: seen anyway
            continue
        paths.append(str(path))
    return list(dict.fromkeys(paths))


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """A virtual environment with the wheel of this checkout installed (dependencies from the running interpreter's
    site-packages, so nothing is downloaded)."""
    root = tmp_path_factory.mktemp("wheel-env")
    source = root / "src"  # a copy of the checkout's files: building writes build/ and *.egg-info/ into its folder
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for name in listed:
        if (REPO_ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(root / "dist")], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{build.stderr[-3000:]}")
    (wheel,) = (root / "dist").glob("ares_rerank-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    outer = _outer_environment_paths()
    if outer:  # run from a virtual environment: the new one sees the base interpreter's packages, not the outer's
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "_outer_environment.pth").write_text("".join(f"{path}\n" for path in outer))
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                              str(wheel)], capture_output=True, text=True)
    if install.returncode != 0:
        pytest.fail(f"installing the wheel failed:\n{install.stderr[-3000:]}")
    return env_dir


@pytest.mark.slow
def test_wheel_user_trains_calibrates_loads_and_evaluates_in_an_empty_folder(wheel_env, tmp_path, tiny_nli_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(), home.mkdir()
    bin_dir = wheel_env / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARES_DATA_DIR")}
    env.update(HOME=str(home), HF_HOME=str(home / "hf"), XDG_CACHE_HOME=str(home / "cache"),
               MPLCONFIGDIR=str(home / "mpl"), TMPDIR=str(home / "tmp"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    (home / "tmp").mkdir()

    def run(*argv: str) -> str:
        done = subprocess.run(list(argv), cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        return done.stdout

    python = str(bin_dir / "python")
    where = run(python, "-c", "import ares_rerank, sys; print(ares_rerank.__file__); print(sys.path)")
    package_file = Path(where.splitlines()[0])
    assert package_file.is_relative_to(wheel_env), f"imported {package_file}, not the wheel's copy"
    assert str(REPO_ROOT) not in where.splitlines()[1]
    package_dir = package_file.parent
    package_before, checkout_before, model_before = (_tree_digest(package_dir), _checkout_state(),
                                                     _tree_digest(tiny_nli_path))

    # Labelled chains as a user writes them: ClaimTrees text with gold labels, no generator metadata.
    run(python, "-c", (
        "import json\n"
        "from ares_rerank.data import load_claimtrees\n"
        "with open('chains.jsonl', 'w') as f:\n"
        "    for c in load_claimtrees(24, 4, start=500):\n"
        "        f.write(json.dumps({'id': c.id, 'base_claims': list(c.base_claims), 'steps': list(c.steps),"
        " 'labels': list(c.labels)}) + '\\n')\n"
        "with open('pairs.jsonl', 'w') as f:\n"
        "    for c in load_claimtrees(6, 4, start=900):\n"
        "        for k, step in enumerate(c.steps):\n"
        "            f.write(json.dumps({'premises': list(c.base_claims), 'hypothesis': step,"
        " 'label': 1 - c.labels[k]}) + '\\n')\n"))
    run("ares-rerank", "train", "head", "--chains_file", "chains.jsonl", "--base_model", str(tiny_nli_path),
        "--output_dir", "run", "--max_steps", "2", "--per_device_train_batch_size", "8", "--eval_steps", "2",
        "--save_steps", "2", "--max_length", "128", "--lora_target_modules", "query", "value",
        "--disable_tqdm", "true", "--val_fraction", "0.2", "--test_fraction", "0.2")
    assert (work / "run" / "head" / "ares_calibration.json").is_file()
    run("ares-rerank", "calibrate", "run/head", "--pairs", "pairs.jsonl", "--output-dir", "calibrated",
        "--plot", "reliability.png")
    record = json.loads((work / "calibrated" / "ares_calibration.json").read_text())
    assert record["calibrated_on"] == "pairs.jsonl" and (work / "reliability.png").is_file()
    loaded = run(python, "-c", "from ares_rerank import load_backbone; b = load_backbone('calibrated'); "
                               "print(type(b).__name__, b.temperature)")
    assert loaded.split()[0] == "EntailmentHead" and float(loaded.split()[1]) == pytest.approx(record["temperature"])
    run("ares-rerank", "eval", "--task", "claimtrees", "--length", "4", "--n", "10", "--backbone", "calibrated",
        "--methods", "ares,entail-prev", "--no-progress", "--name", "mine")
    results = json.loads((work / "ares-eval" / "mine.json").read_text())
    assert set(results["methods"]) == {"ares", "entail-prev"} and results["task"]["num_chains"] == 10

    # Every file written is under the temp folder: the installed package, the checkout and the model are untouched.
    assert _tree_digest(package_dir) == package_before
    assert _checkout_state() == checkout_before
    assert _tree_digest(tiny_nli_path) == model_before
    written = {p.relative_to(work).parts[0] for p in work.rglob("*") if p.is_file()}
    assert written == {"chains.jsonl", "pairs.jsonl", "run", "calibrated", "reliability.png", "ares-eval"}


@pytest.mark.slow
def test_wheel_refuses_to_modify_the_shipped_head(wheel_env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "pairs.jsonl").write_text(json.dumps({"premise": "I have A", "hypothesis": "I have A", "label": 1}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(wheel_env / "bin" / "ares-rerank"), "calibrate", "default", "--pairs", "pairs.jsonl"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "never modifies" in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in work.iterdir()] == ["pairs.jsonl"]
